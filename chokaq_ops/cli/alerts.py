"""`chokaq alerts ...`: alerts that reach a person (docs/alerts.md).

  chokaq alerts ls                                     the alerts in force (pending, firing, resolving)
  chokaq alerts receivers ls|add|set|rm                where notifications go (signed webhooks, Slack)
  chokaq alerts rules ls|add|set|rm                    what is watched, and how often a person is told
  chokaq alerts test RECEIVER                          one test notification through the queue

A receiver's URL and secret are read from a file or stdin (--url-file, --secret-file; `-` is stdin) or
given (--url), never printed back; --generate-secret makes a secret and prints it once, alone on stdout
(with --format json: as the record's `secret`). Changes are audited under --actor (default CHOKAQ_ACTOR,
else cli:<your OS user name>); over a running API (--api URL, docs/cli-json.md) under the token's name,
and they need an admin token. Receivers and rules of the configuration file are shown with source
`config` and are changed there.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from typing import TYPE_CHECKING, Any

from chokaq_ops import errors
from chokaq_ops.alert_model import KINDS
from chokaq_ops.cli import common, target
from chokaq_ops.cli.dlq import add_actor
from chokaq_ops.settings import parse_duration

if TYPE_CHECKING:
    from chokaq_ops.client.db import DbClient
    from chokaq_ops.client.http import HttpClient

RECEIVER_COLUMNS = ("name", "kind", "url", "secret_set", "send_resolved", "timeout_s", "source")
RULE_COLUMNS = ("name", "kind", "receivers", "threshold", "window_s", "for_s", "enabled", "source")
ALERT_COLUMNS = ("rule", "status", "labels", "summary", "active_at", "firing_at")
POLL_S = 0.2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "alerts",
        help="alert rules, receivers and the alerts in force",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = p.add_subparsers(dest="alerts_command", metavar="COMMAND", parser_class=type(p))
    cmds.required = True

    ls = cmds.add_parser("ls", help="the alerts in force")
    _common(ls, actor=False)
    ls.set_defaults(handler=run_ls)

    test = cmds.add_parser("test", help="send one test notification to a receiver, through the queue")
    _common(test)
    test.add_argument("receiver")
    test.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="S",
        help="wait this long for a worker to deliver it (default 30; 0: enqueue only)",
    )
    test.set_defaults(handler=run_test)

    receivers = cmds.add_parser("receivers", help="where notifications go").add_subparsers(
        dest="receivers_command", metavar="COMMAND", parser_class=type(p)
    )
    receivers.required = True
    r_ls = receivers.add_parser("ls", help="every receiver")
    _common(r_ls, actor=False)
    r_ls.set_defaults(handler=run_receivers_ls)
    for name, help_text in (("add", "create a receiver"), ("set", "change a receiver")):
        c = receivers.add_parser(name, help=help_text)
        _common(c)
        c.add_argument("name")
        c.add_argument("--kind", choices=("webhook", "slack"), help="generic signed JSON, or a Slack message")
        c.add_argument("--url", help="the receiver's URL (shows in `ps`; prefer --url-file for secret URLs)")
        c.add_argument("--url-file", metavar="FILE", help="read the URL from FILE (`-`: stdin)")
        c.add_argument("--secret-file", metavar="FILE", help="read the signing secret from FILE (`-`: stdin)")
        c.add_argument(
            "--generate-secret", action="store_true", help="make a random secret and print it once on stdout"
        )
        c.add_argument("--send-resolved", action=argparse.BooleanOptionalAction, default=None)
        c.add_argument("--timeout", type=float, metavar="S", help="seconds per HTTP request (default 10)")
        c.add_argument("--max-alerts", type=int, metavar="N", help="alerts per message at most (0: all)")
        c.set_defaults(handler=run_receiver_add if name == "add" else run_receiver_set)
    r_rm = receivers.add_parser("rm", help="delete a receiver no rule sends to")
    _common(r_rm)
    r_rm.add_argument("name")
    r_rm.set_defaults(handler=run_receiver_rm)

    rules = cmds.add_parser("rules", help="what is watched").add_subparsers(
        dest="rules_command", metavar="COMMAND", parser_class=type(p)
    )
    rules.required = True
    u_ls = rules.add_parser("ls", help="every rule")
    _common(u_ls, actor=False)
    u_ls.set_defaults(handler=run_rules_ls)
    for name, help_text in (("add", "create a rule"), ("set", "change a rule")):
        c = rules.add_parser(name, help=help_text)
        _common(c)
        c.add_argument("name")
        c.add_argument("--kind", choices=sorted(KINDS), help="what the rule watches (docs/alerts.md)")
        c.add_argument("--receivers", metavar="R1,R2")
        c.add_argument("--severity", choices=("info", "warning", "critical"))
        c.add_argument("--threshold", type=float)
        c.add_argument("--window", metavar="DURATION", help="e.g. 10m")
        c.add_argument("--for", dest="for_", metavar="DURATION", help="hold this long before firing")
        c.add_argument("--repeat", metavar="DURATION", help="repeat interval (default: Alerts.*)")
        c.add_argument("--group-by", metavar="L1,L2")
        c.add_argument("--queues", metavar="Q1,Q2")
        c.add_argument("--by", choices=("fingerprint", "reason"))
        c.add_argument("--inhibited-by", metavar="RULE1,RULE2")
        c.add_argument("--inhibit-equal", metavar="L1,L2")
        c.add_argument("--enabled", action=argparse.BooleanOptionalAction, default=None)
        c.set_defaults(handler=run_rule_add if name == "add" else run_rule_set)
    u_rm = rules.add_parser("rm", help="delete a rule")
    _common(u_rm)
    u_rm.add_argument("name")
    u_rm.set_defaults(handler=run_rule_rm)


def _common(parser: argparse.ArgumentParser, *, actor: bool = True) -> None:
    target.add_target(parser)
    common.add_format(parser)
    if actor:
        add_actor(parser)


def _read(path: str, what: str, field: str) -> str:
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()  # noqa: SIM115
    except OSError as exc:
        raise errors.UsageError(f"cannot read the {what} from {path}: {exc.strerror}", field=field) from None
    if not text.strip():
        raise errors.UsageError(f"the {what} file {path} is empty", field=field)
    return text.strip()


def _receiver_values(args: argparse.Namespace) -> tuple[dict[str, Any], str | None]:
    values: dict[str, Any] = {}
    if args.url and args.url_file:
        raise errors.UsageError("give --url or --url-file, not both", field="url")
    if args.url:
        values["url"] = args.url
    if args.url_file:
        values["url"] = _read(args.url_file, "URL", "url")
    if args.secret_file and args.generate_secret:
        raise errors.UsageError("give --secret-file or --generate-secret, not both", field="secret")
    generated = None
    if args.secret_file:
        values["secret"] = _read(args.secret_file, "secret", "secret")
    if args.generate_secret:
        generated = values["secret"] = secrets.token_urlsafe(32)
    for key, value in (
        ("kind", args.kind),
        ("send_resolved", args.send_resolved),
        ("timeout_s", args.timeout),
        ("max_alerts", args.max_alerts),
    ):
        if value is not None:
            values[key] = value
    return values, generated


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...], noun: str | None) -> None:
    shown = [{k: ",".join(v) if isinstance(v, list) else v for k, v in r.items()} for r in rows]
    if noun is None:
        common.print_table(shown, columns)
    else:
        common.emit(shown, columns, "table", noun=noun)


def _listing(
    args: argparse.Namespace, rows: list[dict[str, Any]], columns: tuple[str, ...], noun: str
) -> int:
    if args.format == "json":
        common.print_json(rows)
    else:
        _table(rows, columns, noun)
    return 0


def _one(args: argparse.Namespace, view: dict[str, Any], columns: tuple[str, ...]) -> int:
    if args.format == "json":
        common.print_json(view)
    else:
        _table([view], columns, None)
    return 0


def _deleted(args: argparse.Namespace, kind: str) -> int:
    if args.format == "json":
        common.print_json({"deleted": args.name})
    else:
        print(f"chokaq: {kind} {args.name} deleted", file=sys.stderr)
    return 0


def run_ls(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        rows = client.alert_rows()
    if args.format == "json":
        common.print_json(rows)
        return 0
    for r in rows:
        r["summary"] = r["annotations"].get("summary", "")
        r["labels"] = ",".join(f"{k}={v}" for k, v in sorted(r["labels"].items()) if k != "alertname")
    common.emit(rows, ALERT_COLUMNS, "table", noun="alerts")
    return 0


def run_receivers_ls(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        rows = client.alert_receiver_rows()
    return _listing(args, rows, RECEIVER_COLUMNS, "receivers")


def _print_receiver(args: argparse.Namespace, view: dict[str, Any], generated: str | None) -> int:
    if generated is None:
        return _one(args, view, RECEIVER_COLUMNS)
    if args.format == "json":
        # The one place the secret is shown: a script keeps it from this record.
        common.print_json({**view, "secret": generated})
        return 0
    # The secret alone on stdout, once (as `token create` prints a token); the receiver on stderr.
    print(generated)
    print(f"chokaq: receiver {view['name']} saved; the secret above is not shown again", file=sys.stderr)
    return 0


def run_receiver_add(args: argparse.Namespace) -> int:
    values, generated = _receiver_values(args)
    if "url" not in values:
        raise errors.UsageError("a new receiver needs --url or --url-file", field="url")
    with target.client_of(args) as client:
        view = client.create_alert_receiver(args.name, **values)
    return _print_receiver(args, view, generated)


def run_receiver_set(args: argparse.Namespace) -> int:
    values, generated = _receiver_values(args)
    if not values:
        raise errors.UsageError("nothing to change: give at least one option")
    with target.client_of(args) as client:
        view = client.update_alert_receiver(args.name, **values)
    return _print_receiver(args, view, generated)


def run_receiver_rm(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        client.delete_alert_receiver(args.name)
    return _deleted(args, "receiver")


def run_rules_ls(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        rows = client.alert_rule_rows()
    return _listing(args, rows, RULE_COLUMNS, "rules")


def _duration(value: str | None, flag: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value, f"--{flag}")
    except errors.ConfigError as exc:
        raise errors.UsageError(str(exc), field=flag) from None


def _rule_values(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {
        "kind": args.kind,
        "receivers": common.csv_list(args.receivers) if args.receivers is not None else None,
        "severity": args.severity,
        "threshold": args.threshold,
        "window_s": _duration(args.window, "window"),
        "for_s": _duration(args.for_, "for"),
        "repeat_interval_s": _duration(args.repeat, "repeat"),
        "group_by": common.csv_list(args.group_by) if args.group_by is not None else None,
        "queues": common.csv_list(args.queues) if args.queues is not None else None,
        "by": args.by,
        "inhibited_by": common.csv_list(args.inhibited_by) if args.inhibited_by is not None else None,
        "inhibit_equal": common.csv_list(args.inhibit_equal) if args.inhibit_equal is not None else None,
        "enabled": args.enabled,
    }
    return {k: v for k, v in values.items() if v is not None}


def run_rule_add(args: argparse.Namespace) -> int:
    values = _rule_values(args)
    for needed in ("kind", "receivers"):
        if needed not in values:
            raise errors.UsageError(f"a new rule needs --{needed}", field=needed)
    with target.client_of(args) as client:
        view = client.create_alert_rule(args.name, **values)
    return _one(args, view, RULE_COLUMNS)


def run_rule_set(args: argparse.Namespace) -> int:
    values = _rule_values(args)
    if not values:
        raise errors.UsageError("nothing to change: give at least one option")
    with target.client_of(args) as client:
        view = client.update_alert_rule(args.name, **values)
    return _one(args, view, RULE_COLUMNS)


def run_rule_rm(args: argparse.Namespace) -> int:
    with target.client_of(args) as client:
        client.delete_alert_rule(args.name)
    return _deleted(args, "rule")


def run_test(args: argparse.Namespace) -> int:
    """Exit 0 when delivered (or, with --wait 0, enqueued); a failed delivery or none within --wait is a
    failure (exit 5), after the record saying which: exit 1 is a halted plan's alone (docs/cli-json.md)."""
    if args.wait < 0:
        raise errors.UsageError("--wait must be 0 or more seconds", field="wait")
    with target.client_of(args) as client:
        job_id = client.send_alert_test(args.receiver)
        result: dict[str, Any] = {"receiver": args.receiver, "job_id": job_id, "delivered": None}
        queue = _wait_for_delivery(client, result, args.wait)
    if args.format == "json":
        common.print_json(result)
    elif result["delivered"]:
        print(f"delivered to {args.receiver} (job {job_id})")
    elif not args.wait:
        print(job_id)
    if result["delivered"] is False:
        raise errors.ChokaqError(
            f"delivery to {args.receiver} failed ({result['failure_reason']}): {result['error']}"
        )
    if result["delivered"] is None and args.wait:
        raise errors.ChokaqError(
            f"not delivered within {args.wait:g}s (job {job_id} waits in queue {queue}: is a worker running?)"
        )
    return 0


def _wait_for_delivery(client: DbClient | HttpClient, result: dict[str, Any], wait: float) -> str | None:
    """Fill in `delivered` (and why not) once the job left the hot table; the job's queue."""
    deadline = time.monotonic() + wait
    queue = None
    while wait:
        job = client.get_job(result["job_id"])
        queue = job.queue
        if job.location != "hot":
            result["delivered"] = job.location == "archive"
            if not result["delivered"]:
                result["failure_reason"] = job.get("failure_reason")
                lines = (job.get("error_details") or "").strip().splitlines()
                result["error"] = lines[0] if lines else None
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    return queue
