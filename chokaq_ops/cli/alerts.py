"""`chokaq alerts ...`: alerts that reach a person (docs/alerts.md).

  chokaq alerts ls                                     the alerts in force (pending, firing, resolving)
  chokaq alerts receivers ls|add|set|rm                where notifications go (signed webhooks, Slack)
  chokaq alerts rules ls|add|set|rm                    what is watched, and how often a person is told
  chokaq alerts test RECEIVER                          one test notification through the queue

A receiver's URL and secret are read from a file or stdin (--url-file, --secret-file; `-` is stdin) or
given (--url), never printed back; --generate-secret makes a secret and prints it once, alone on stdout.
Changes are audited under --actor (default CHOKAQ_ACTOR, else cli:<your OS user name>). Receivers and
rules of the configuration file are shown with source `config` and are changed there.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from typing import Any

from chokaq_ops import errors
from chokaq_ops.alert_catalog import AlertCatalog
from chokaq_ops.alert_model import KINDS
from chokaq_ops.cli import common
from chokaq_ops.cli.dlq import actor_of, add_actor
from chokaq_ops.models import Actor
from chokaq_ops.settings import parse_duration
from chokaq_ops.storage import Store
from chokaq_ops.storage.migrate import require_current

RECEIVER_COLUMNS = ("name", "kind", "url", "secret_set", "send_resolved", "timeout_s", "source")
RULE_COLUMNS = ("name", "kind", "receivers", "threshold", "window_s", "for_s", "enabled", "source")
ALERT_COLUMNS = ("rule", "status", "labels", "summary", "active_at", "firing_at")


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
    common.add_common(parser)
    common.add_format(parser)
    if actor:
        add_actor(parser)


class _Opened:
    def __init__(self, args: argparse.Namespace) -> None:
        self.settings = common.settings_from(args)
        self.store: Store = common.open_store(args, self.settings)
        require_current(self.store)
        self.catalog = AlertCatalog(self.settings, self.store)
        self.actor = Actor(actor_of(args))

    def __enter__(self) -> _Opened:
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def _read(path: str, what: str) -> str:
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()  # noqa: SIM115
    except OSError as exc:
        raise errors.UsageError(f"cannot read the {what} from {path}: {exc.strerror}") from None
    if not text.strip():
        raise errors.UsageError(f"the {what} file {path} is empty")
    return text.strip()


def _receiver_values(args: argparse.Namespace) -> tuple[dict[str, Any], str | None]:
    values: dict[str, Any] = {}
    if args.url and args.url_file:
        raise errors.UsageError("give --url or --url-file, not both")
    if args.url:
        values["url"] = args.url
    if args.url_file:
        values["url"] = _read(args.url_file, "URL")
    if args.secret_file and args.generate_secret:
        raise errors.UsageError("give --secret-file or --generate-secret, not both")
    generated = None
    if args.secret_file:
        values["secret"] = _read(args.secret_file, "secret")
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


def _show(args: argparse.Namespace, rows: list[dict[str, Any]], columns: tuple[str, ...], noun: str) -> None:
    if args.format == "table":
        rows = [{k: ",".join(v) if isinstance(v, list) else v for k, v in r.items()} for r in rows]
    common.emit(rows, columns, args.format, noun=noun)


def run_ls(args: argparse.Namespace) -> int:
    with _Opened(args) as o:
        rows = o.store.alert_states()
    for r in rows:
        r["summary"] = r["annotations"].get("summary", "")
        if args.format == "table":
            r["labels"] = ",".join(f"{k}={v}" for k, v in sorted(r["labels"].items()) if k != "alertname")
    common.emit(rows, ALERT_COLUMNS, args.format, noun="alerts")
    return 0


def run_receivers_ls(args: argparse.Namespace) -> int:
    with _Opened(args) as o:
        _show(args, [r.view() for r in o.catalog.receivers()], RECEIVER_COLUMNS, "receivers")
    return 0


def _print_receiver(args: argparse.Namespace, view: dict[str, Any], generated: str | None) -> None:
    if generated is not None:
        # The secret alone on stdout, once (as `token create` prints a token); the receiver on stderr.
        print(generated)
        print(f"chokaq: receiver {view['name']} saved; the secret above is not shown again", file=sys.stderr)
        return
    _show(args, [view], RECEIVER_COLUMNS, "receivers")


def run_receiver_add(args: argparse.Namespace) -> int:
    values, generated = _receiver_values(args)
    if "url" not in values:
        raise errors.UsageError("a new receiver needs --url or --url-file")
    with _Opened(args) as o:
        view = o.catalog.create_receiver({"name": args.name, **values}, actor=o.actor).view()
    _print_receiver(args, view, generated)
    return 0


def run_receiver_set(args: argparse.Namespace) -> int:
    values, generated = _receiver_values(args)
    if not values:
        raise errors.UsageError("nothing to change: give at least one option")
    with _Opened(args) as o:
        view = o.catalog.update_receiver(args.name, values, actor=o.actor).view()
    _print_receiver(args, view, generated)
    return 0


def run_receiver_rm(args: argparse.Namespace) -> int:
    with _Opened(args) as o:
        o.catalog.delete_receiver(args.name, actor=o.actor)
    print(f"chokaq: receiver {args.name} deleted", file=sys.stderr)
    return 0


def run_rules_ls(args: argparse.Namespace) -> int:
    with _Opened(args) as o:
        _show(args, [r.view() for r in o.catalog.rules()], RULE_COLUMNS, "rules")
    return 0


def _duration(value: str | None, flag: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value, flag)
    except errors.ConfigError as exc:
        raise errors.UsageError(str(exc)) from None


def _rule_values(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {
        "kind": args.kind,
        "receivers": common.csv_list(args.receivers) if args.receivers is not None else None,
        "severity": args.severity,
        "threshold": args.threshold,
        "window_s": _duration(args.window, "--window"),
        "for_s": _duration(args.for_, "--for"),
        "repeat_interval_s": _duration(args.repeat, "--repeat"),
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
            raise errors.UsageError(f"a new rule needs --{needed}")
    with _Opened(args) as o:
        view = o.catalog.create_rule({"name": args.name, **values}, actor=o.actor).view()
    _show(args, [view], RULE_COLUMNS, "rules")
    return 0


def run_rule_set(args: argparse.Namespace) -> int:
    values = _rule_values(args)
    if not values:
        raise errors.UsageError("nothing to change: give at least one option")
    with _Opened(args) as o:
        view = o.catalog.update_rule(args.name, values, actor=o.actor).view()
    _show(args, [view], RULE_COLUMNS, "rules")
    return 0


def run_rule_rm(args: argparse.Namespace) -> int:
    with _Opened(args) as o:
        o.catalog.delete_rule(args.name, actor=o.actor)
    print(f"chokaq: rule {args.name} deleted", file=sys.stderr)
    return 0


def run_test(args: argparse.Namespace) -> int:
    if args.wait < 0:
        raise errors.UsageError("--wait must be 0 or more seconds")
    with _Opened(args) as o:
        job_id = o.catalog.test(args.receiver, actor=o.actor)
        result: dict[str, Any] = {"receiver": args.receiver, "job_id": job_id, "delivered": None}
        deadline = time.monotonic() + args.wait
        while args.wait and time.monotonic() < deadline:
            job = o.store.get_job(job_id)
            if job.location != "hot":
                result["delivered"] = job.location == "archive"
                if job.location == "dlq":
                    result["failure_reason"] = job.get("failure_reason")
                    result["error"] = (job.get("error_details") or "").strip().splitlines()[0:1]
                break
            time.sleep(0.2)
        queue = o.settings.alerts.queue
    if args.format == "json":
        common.print_json(result)
    elif result["delivered"]:
        print(f"delivered to {args.receiver} (job {job_id})")
    elif result["delivered"] is False:
        print(f"chokaq: delivery to {args.receiver} failed ({result['failure_reason']}): {result['error']}",
              file=sys.stderr)  # fmt: skip
    elif args.wait:
        print(f"chokaq: not delivered within {args.wait:g}s (job {job_id} waits in queue {queue}: "
              "is a worker running?)", file=sys.stderr)  # fmt: skip
    else:
        print(job_id)
    return 0 if result["delivered"] or not args.wait else 1
