"""`chokaq alerts ...` (docs/alerts.md) on both databases and through the real API (`on`): receivers and
rules from the command line with the JSON lines of the contract (docs/cli-json.md: listings as rows, one
object as a record, every line checked against the shipped schema), audited under the actor (the token's
name over the API), secrets read from a file or generated and printed once, usage errors exit 2 naming
the field and change nothing, `alerts test` through a real worker and a real webhook receiver: exit 0
delivered, exit 5 (never 1: that is a halted plan's) when it failed or nobody delivered it in time."""

from __future__ import annotations

import json

from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.hosting import Host
from chokaq_ops.settings import Settings
from tests.support.dbprobe import scalar
from tests.support.webhook import SECRET_PATH, signature_ok, webhook


def _one(lines: list[dict], event: str = "record") -> dict:
    """The one object before the final line, checking it is the only line there."""
    [line, end] = lines
    assert (line["event"], end["event"]) == (event, "finished"), lines
    return line[event]


def test_receivers_and_rules_from_the_command_line(capsys, on, store, tmp_path):
    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret-from-a-file-0001\n")
    url = "https://hooks.example.com" + SECRET_PATH
    code, lines, err = on.run(capsys, "alerts", "receivers", "add", "ops", "--url", url,
                              "--secret-file", str(secret_file))  # fmt: skip
    assert code == 0, err
    view = _one(lines)
    assert lines[-1]["command"] == "alerts receivers add"
    assert view["url"] == "https://hooks.example.com/…" and view["secret_set"] is True
    assert "s3cret-from-a-file" not in json.dumps(lines) + err and SECRET_PATH not in json.dumps(lines) + err

    code, out, err = on.text(capsys, "alerts", "receivers", "set", "ops", "--generate-secret")
    assert code == 0 and len(out.strip()) >= 32 and "\n" not in out.strip(), "the secret alone, once"
    generated = out.strip()
    assert store.alert_receivers()[0].secret == generated
    code, lines, err = on.run(capsys, "alerts", "receivers", "set", "ops", "--generate-secret")
    assert code == 0, err
    rotated = _one(lines)
    assert rotated["secret"] == store.alert_receivers()[0].secret != generated and rotated["secret_set"]
    assert rotated["secret"] not in err
    code, out, _ = on.text(capsys, "alerts", "receivers", "ls")
    assert code == 0 and generated not in out and rotated["secret"] not in out and "ops" in out
    code, lines, _ = on.run(capsys, "alerts", "receivers", "ls")
    assert [line["row"]["name"] for line in lines[:-1]] == ["ops"] and "secret" not in lines[0]["row"]

    code, lines, err = on.run(capsys, "alerts", "rules", "add", "dead", "--kind", "dlq_growth", "--receivers",
                              "ops", "--threshold", "5", "--window", "15m", "--for", "1m")  # fmt: skip
    assert code == 0, err
    rule = _one(lines)
    assert (rule["window_s"], rule["for_s"], rule["threshold"], rule["receivers"]) == (900, 60, 5, ["ops"])
    code, lines, _ = on.run(capsys, "alerts", "ls")
    assert code == 0 and lines == [lines[-1]] and lines[-1]["rows"] == 0
    code, lines, _ = on.run(capsys, "alerts", "rules", "set", "dead", "--no-enabled")
    assert code == 0 and _one(lines)["enabled"] is False and not store.alert_rules()[0].enabled
    code, out, _ = on.text(capsys, "alerts", "rules", "ls")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["dead", "dlq_growth", "ops"]
    actors = {a["actor"] for a in store.list_audit().items if a["action"].startswith("alert_")}
    assert actors == {on.actor}
    audit_text = json.dumps([a.details for a in store.list_audit().items])
    assert generated not in audit_text and "s3cret-from-a-file" not in audit_text

    before = scalar(store, "SELECT count(*) FROM audit_log")
    for argv, field, needle in (
        (("alerts", "rules", "add", "x", "--kind", "zombies"), "receivers", "--receivers"),
        (
            ("alerts", "rules", "add", "x", "--kind", "zombies", "--receivers", "ops", "--window", "soon"),
            "window",
            "window",
        ),
        (
            ("alerts", "rules", "add", "x", "--kind", "zombies", "--receivers", "nobody"),
            "receivers",
            "receivers",
        ),
        (("alerts", "receivers", "add", "y", "--url", "ftp://nope", "--generate-secret"), "url", "url"),
        (
            ("alerts", "receivers", "add", "y", "--url", url, "--secret-file", str(tmp_path / "missing")),
            "secret",
            "secret",
        ),
        (("alerts", "receivers", "set", "ops"), None, "nothing to change"),
        (("alerts", "test", "ops", "--wait", "-1"), "wait", "--wait"),
    ):
        code, lines, err = on.run(capsys, *argv)
        assert code == 2 and needle in err, (argv, err)
        [end] = lines
        assert (end["reason"], end.get("field")) == ("usage", field), (argv, end)
    code, lines, err = on.run(capsys, "alerts", "rules", "rm", "nope")
    assert code == 2 and "no rule named nope" in err  # an unknown name is a usage error (docs/cli-json.md)
    assert (lines[-1]["reason"], lines[-1]["field"]) == ("not_found", "name")
    assert scalar(store, "SELECT count(*) FROM audit_log") == before
    code, lines, err = on.run(capsys, "alerts", "receivers", "rm", "ops")
    assert code == 2 and lines[-1]["reason"] == "conflict" and "dead" in err, "a rule sends to it"
    code, lines, _ = on.run(capsys, "alerts", "rules", "rm", "dead")
    assert code == 0 and _one(lines) == {"deleted": "dead"}
    code, out, err = on.text(capsys, "alerts", "receivers", "rm", "ops")
    assert code == 0 and out == "" and "receiver ops deleted" in err
    assert store.alert_receivers() == [] and store.alert_rules() == []


def test_alerts_test_goes_through_the_queue_to_a_real_receiver(capsys, on, db_url, store, tmp_path):
    with webhook() as hook:
        secret = tmp_path / "secret"
        secret.write_text("whsec-cli-test-000111222")
        assert on.text(capsys, "alerts", "receivers", "add", "ops", "--url", hook.url,
                       "--secret-file", str(secret))[0] == 0  # fmt: skip
        code, out, err = on.text(capsys, "alerts", "test", "ops", "--wait", "0")
        assert code == 0 and store.get_job(out.strip()).type == "chokaq.alert.deliver.v1"
        settings = Settings().with_overrides({"storage.url": db_url, "worker.polling_interval": 0.05})
        host = Host(settings, store, registry=Registry(), run_rescue=False, run_retention=False)
        host.start()
        try:
            code, lines, err = on.run(capsys, "alerts", "test", "ops", "--wait", "20")
            assert code == 0, err
            assert _one(lines)["delivered"] is True and lines[-1]["command"] == "alerts test"
            assert len(hook.requests) == 2 and all(
                signature_ok("whsec-cli-test-000111222", r) for r in hook.requests
            )
            assert hook.requests[0].json["alerts"][0]["labels"]["alertname"] == "chokaq_test"
            hook.answer(403)  # a misconfigured receiver: Fatal at once
            code, lines, err = on.run(capsys, "alerts", "test", "ops", "--wait", "20")
        finally:
            host.shutdown()
        assert code == 5 and "delivery to ops failed (Fatal)" in err
        [result, end] = lines
        assert result["record"]["delivered"] is False and result["record"]["failure_reason"] == "Fatal"
        assert "403" in result["record"]["error"]
        assert (end["event"], end["exit_code"], end["reason"]) == ("error", 5, "failure")
        code, lines, err = on.run(capsys, "alerts", "test", "ops", "--wait", "0.3")
        assert code == 5 and "not delivered within 0.3s" in err and "chokaq.alerts" in err
        assert lines[0]["record"]["delivered"] is None and lines[-1]["reason"] == "failure"
        code, out, err = on.text(capsys, "alerts", "test", "ops", "--wait", "0.3")
        assert code == 5 and out == "" and "is a worker running?" in err
