"""`chokaq alerts ...` (docs/alerts.md): receivers and rules from the command line, audited under the
actor, secrets read from a file or generated and printed once, `alerts test` through a real worker and a
real webhook receiver, usage errors exit 2 and change nothing."""

from __future__ import annotations

import json
import threading

from chokaq_ops.engine.handlers import Registry
from chokaq_ops.engine.hosting import Host
from chokaq_ops.settings import Settings
from tests.support.cli import chokaq, record, rows
from tests.support.dbprobe import scalar
from tests.support.webhook import SECRET_PATH, signature_ok, webhook


def test_receivers_and_rules_from_the_command_line(capsys, db_url, store, tmp_path, monkeypatch):
    monkeypatch.setenv("CHOKAQ_ACTOR", "ops-lead")
    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret-from-a-file-0001\n")
    url = "https://hooks.example.com" + SECRET_PATH
    code, out, err = chokaq(capsys, db_url, "alerts", "receivers", "add", "ops", "--url", url,
                            "--secret-file", str(secret_file), "--format", "json")  # fmt: skip
    assert code == 0, err
    [view] = rows(out)
    assert view["url"] == "https://hooks.example.com/…" and view["secret_set"] is True
    assert "s3cret-from-a-file" not in out + err and SECRET_PATH not in out + err

    code, out, err = chokaq(capsys, db_url, "alerts", "receivers", "set", "ops", "--generate-secret")
    assert code == 0 and len(out.strip()) >= 32 and "\n" not in out.strip(), "the secret alone, once"
    generated = out.strip()
    assert store.alert_receivers()[0].secret == generated
    code, out, _ = chokaq(capsys, db_url, "alerts", "receivers", "ls")
    assert code == 0 and generated not in out and "ops" in out

    code, out, err = chokaq(capsys, db_url, "alerts", "rules", "add", "dead", "--kind", "dlq_growth",
                            "--receivers", "ops", "--threshold", "5", "--window", "15m", "--for", "1m",
                            "--format", "json")  # fmt: skip
    assert code == 0, err
    [rule] = rows(out)
    assert (rule["window_s"], rule["for_s"], rule["threshold"]) == (900, 60, 5)
    code, out, _ = chokaq(capsys, db_url, "alerts", "ls", "--format", "json")
    assert code == 0 and rows(out) == []
    code, _, _ = chokaq(capsys, db_url, "alerts", "rules", "set", "dead", "--no-enabled")
    assert code == 0 and not store.alert_rules()[0].enabled
    actors = {a["actor"] for a in store.list_audit().items if a["action"].startswith("alert_")}
    assert actors == {"ops-lead"}
    audit_text = json.dumps([a.details for a in store.list_audit().items])
    assert generated not in audit_text and "s3cret-from-a-file" not in audit_text

    before = scalar(store, "SELECT count(*) FROM audit_log")
    for argv, needle in (
        (("alerts", "rules", "add", "x", "--kind", "zombies"), "--receivers"),
        (
            ("alerts", "rules", "add", "x", "--kind", "zombies", "--receivers", "ops", "--window", "soon"),
            "window",
        ),
        (("alerts", "rules", "add", "x", "--kind", "zombies", "--receivers", "nobody"), "receivers"),
        (("alerts", "receivers", "add", "y", "--url", "ftp://nope", "--generate-secret"), "url"),
        (
            ("alerts", "receivers", "add", "y", "--url", url, "--secret-file", str(tmp_path / "missing")),
            "secret",
        ),
        (("alerts", "receivers", "set", "ops"), "nothing to change"),
        (("alerts", "test", "ops", "--wait", "-1"), "--wait"),
    ):
        code, out, err = chokaq(capsys, db_url, *argv)
        assert code == 2 and needle in err, (argv, err)
    code, _, err = chokaq(capsys, db_url, "alerts", "rules", "rm", "nope")
    assert code == 2 and "no rule named nope" in err  # an unknown name is a usage error (docs/cli-json.md)
    assert scalar(store, "SELECT count(*) FROM audit_log") == before
    assert chokaq(capsys, db_url, "alerts", "receivers", "rm", "ops")[0] == 2, "a rule sends to it"
    assert chokaq(capsys, db_url, "alerts", "rules", "rm", "dead")[0] == 0
    assert chokaq(capsys, db_url, "alerts", "receivers", "rm", "ops")[0] == 0
    assert store.alert_receivers() == [] and store.alert_rules() == []


def test_alerts_test_goes_through_the_queue_to_a_real_receiver(capsys, db_url, store, tmp_path):
    with webhook() as hook:
        secret = tmp_path / "secret"
        secret.write_text("whsec-cli-test-000111222")
        assert chokaq(capsys, db_url, "alerts", "receivers", "add", "ops", "--url", hook.url,
                      "--secret-file", str(secret))[0] == 0  # fmt: skip
        code, out, err = chokaq(capsys, db_url, "alerts", "test", "ops", "--wait", "0")
        assert code == 0 and store.get_job(out.strip()).type == "chokaq.alert.deliver.v1"
        settings = Settings().with_overrides({"storage.url": db_url, "worker.polling_interval": 0.05})
        host = Host(settings, store, registry=Registry(), run_rescue=False, run_retention=False)
        host.start()
        try:
            result: dict = {}
            t = threading.Thread(
                target=lambda: result.update(
                    zip(
                        ("code", "out", "err"),
                        chokaq(capsys, db_url, "alerts", "test", "ops", "--wait", "20", "--format", "json"),
                        strict=True,
                    )
                )
            )
            t.start()
            t.join(30)
        finally:
            host.shutdown()
        assert result["code"] == 0, result
        assert record(result["out"])["delivered"] is True
        assert len(hook.requests) == 2 and all(
            signature_ok("whsec-cli-test-000111222", r) for r in hook.requests
        )
        assert hook.requests[0].json["alerts"][0]["labels"]["alertname"] == "chokaq_test"
        hook.answer(404)
        code, _, err = chokaq(capsys, db_url, "alerts", "test", "ops", "--wait", "0.3")
        assert code == 1 and "not delivered within" in err
