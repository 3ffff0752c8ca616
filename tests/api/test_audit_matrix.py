"""The authorization-and-audit matrix, generated from the route map (chokaq_api.routes.ROUTES).

For every route that changes something, every caller (no token, reader, operator, admin) gets the status
its role allows; an allowed call changes what it should and writes its audit rows, named after the token.
Then the same call runs with a failure injected at the end of any transaction that inserted an audit row
(after the audit insert and the change): the call fails and leaves neither the change nor an audit row,
which holds only if the audit row and the change share one transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import pytest

from chokaq_api import routes as route_table
from chokaq_ops.cli.token import cli_actor
from chokaq_ops.models import Actor
from chokaq_ops.storage import Store
from tests.api.conftest import PREFIX, TEST_SETTINGS, WORKER, ApiClient, enqueue, to_archive, to_dlq
from tests.api.test_security import routes
from tests.support.dbprobe import age, is_pg, scalar, sql

# POSTs that change nothing (dry runs); every other non-GET route must have a case below.
READ_ONLY = {("POST", "/dlq/preview"), ("POST", "/jobs/locate")}
CALLERS = (None, "reader", "operator", "admin")


@dataclass(frozen=True)
class Case:
    """How to call one route on fresh data: `arrange` returns (path, body, state), `changed(store,
    state)` tells whether the call took effect, `actions` are the audit actions it must write."""

    arrange: Callable[[Store], tuple[str, Any, Any]]
    changed: Callable[[Store, Any], bool]
    actions: tuple[str, ...]
    ok: int = 200
    postgres_only: bool = False  # the route acts on something only PostgreSQL has (another session)


def _schedule(store: Store, **kw: Any) -> str:
    store.create_schedule(
        {"name": "matrix", "type": "matrix.v1", "cron": "@hourly", **kw}, actor=Actor("creator")
    )
    return "matrix"


def _plan(store: Store, by: str = "creator") -> tuple[str, str]:
    job = to_dlq(store)[0]
    return store.create_plan("resurrect", actor=Actor(by), ids=[job])["id"], job


def _leased(store: Store) -> str:
    plan_id = _plan(store)[0]
    store.lease_plan(plan_id, holder="cron@host:1:ab", actor=Actor("creator"))
    return plan_id


def _location(store: Store, job: str) -> str:
    return store.get_job(job)["location"]


def _old_archive(store: Store) -> str:
    job = to_archive(store)[0]
    age(store, "jobs_archive", [job], 7200, "finished_at")
    return job


def _receiver(store: Store, name: str = "matrix-r") -> str:
    values = {"name": name, "url": "http://127.0.0.1:9/hook", "secret": "s" * 20}
    return store.create_alert_receiver(values, actor=Actor("creator")).name


def _rule(store: Store) -> str:
    values = {"name": "matrix-rule", "kind": "zombies", "receivers": [_receiver(store)]}
    return store.create_alert_rule(values, actor=Actor("creator")).name


def _count(store: Store, table: str) -> int:
    return scalar(store, f"SELECT count(*) FROM {table}")


def _fetched_abandoned(store: Store) -> str:
    job = enqueue(store, queue="rescued")[0]
    store.fetch(WORKER, 1, queues=["rescued"])
    age(store, "jobs_hot", [job], 60, "updated_at")  # reserved a minute ago and never started
    return job


_HOLDERS: list[Any] = []


def _holding_session(store: Store) -> int:
    """Another session of the database that keeps a snapshot open, idle in its transaction."""
    from chokaq_ops.storage.dialects import from_url

    conn = from_url(store.url).connect()
    conn.autocommit = False
    cur = conn.cursor()
    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    cur.execute("SELECT pg_backend_pid()")
    _HOLDERS.append(conn)
    return int(cur.fetchone()[0])


@pytest.fixture(autouse=True)
def _close_holders() -> Iterator[None]:
    yield
    while _HOLDERS:
        conn = _HOLDERS.pop()
        with suppress(Exception):
            conn.close()


CASES: dict[tuple[str, str], Case] = {
    ("POST", "/jobs"): Case(
        lambda s: ("/jobs", {"type": "matrix.v1", "id": "matrix-job"}, None),
        lambda s, _: scalar(s, "SELECT count(*) FROM jobs_hot WHERE id = 'matrix-job'") == 1,
        ("enqueue",),
        ok=201,
    ),
    ("POST", "/jobs/cancel"): Case(
        lambda s: ("/jobs/cancel", {"ids": (j := enqueue(s))}, j[0]),
        lambda s, job: _location(s, job) == "dlq",
        ("cancel",),
    ),
    ("PATCH", "/jobs/<job_id>"): Case(
        lambda s: (f"/jobs/{(j := enqueue(s)[0])}", {"priority": 3}, j),
        lambda s, job: s.get_job(job)["priority"] == 3,
        ("edit_pending",),
    ),
    ("POST", "/dlq/resurrect"): Case(
        lambda s: ("/dlq/resurrect", {"ids": (j := to_dlq(s))}, j[0]),
        lambda s, job: _location(s, job) == "hot",
        ("resurrect",),
    ),
    ("POST", "/dlq/purge"): Case(
        lambda s: ("/dlq/purge", {"ids": (j := to_dlq(s))}, j[0]),
        lambda s, job: s.count_dlq() == 0,
        ("purge_dlq",),
    ),
    ("PATCH", "/dlq/<job_id>"): Case(
        lambda s: (f"/dlq/{(j := to_dlq(s)[0])}", {"tags": "matrix"}, j),
        lambda s, job: s.get_job(job)["tags"] == "matrix",
        ("edit_dlq",),
    ),
    ("POST", "/dlq/<job_id>/resurrect"): Case(
        lambda s: (f"/dlq/{(j := to_dlq(s)[0])}/resurrect", {}, j),
        lambda s, job: _location(s, job) == "hot",
        ("resurrect",),
    ),
    ("POST", "/archive/purge"): Case(
        lambda s: ("/archive/purge", {"older_than": "1h"}, _old_archive(s)),
        lambda s, job: scalar(s, "SELECT count(*) FROM jobs_archive") == 0,
        ("purge_archive",),
    ),
    ("PATCH", "/queues/<name>"): Case(
        lambda s: ("/queues/default", {"paused": True}, None),
        lambda s, _: s.queue_stats("default")[0]["paused"],
        ("set_queue",),
    ),
    ("PATCH", "/circuits/<path:type_key>"): Case(
        lambda s: ("/circuits/matrix.v1", {"state": "open"}, None),
        lambda s, _: any(c["type"] == "matrix.v1" and c["forced"] for c in s.list_circuits()),
        ("set_circuit",),
    ),
    ("PATCH", "/workers/<worker_id>"): Case(
        lambda s: (
            (
                s.worker_register(
                    "w-matrix", host="h", pid=1, queues=None, concurrency=8, running=0, prefetched=0
                )
                and None
            )
            or ("/workers/w-matrix", {"concurrency": 2}, None)
        ),
        lambda s, _: s.list_registry()[0]["desired_concurrency"] == 2,
        ("set_worker",),
    ),
    ("POST", "/horizon/cancel"): Case(
        lambda s: ("/horizon/cancel", {"pid": (p := _holding_session(s)), "confirm": p}, p),
        lambda s, pid: s.session(pid) is None,
        ("cancel_session", "terminate_session"),
        postgres_only=True,
    ),
    ("POST", "/rescue"): Case(
        lambda s: ("/rescue", None, _fetched_abandoned(s)),
        lambda s, job: s.get_job(job)["status"] == "pending",
        ("rescue_recover", "rescue_orphans", "rescue_zombies"),
    ),
    ("POST", "/plans"): Case(
        lambda s: ("/plans", {"action": "resurrect", "ids": to_dlq(s)}, None),
        lambda s, _: s.list_plans()[1] == 1,
        ("plan_create",),
        ok=201,
    ),
    ("POST", "/plans/<plan_id>/execute"): Case(
        lambda s: (f"/plans/{(p := _plan(s))[0]}/execute", {}, p[1]),
        lambda s, job: _location(s, job) == "hot",
        ("plan_start", "resurrect", "plan_finish"),  # the plan's lifecycle is audited with its chunk
    ),
    ("POST", "/plans/<plan_id>/discard"): Case(
        lambda s: (f"/plans/{(p := _plan(s))[0]}/discard", None, p[0]),
        lambda s, plan: s.get_plan(plan)["state"] == "discarded",
        ("plan_discard",),
    ),
    ("POST", "/alerts/receivers"): Case(
        lambda s: (
            "/alerts/receivers",
            {"name": "m", "url": "http://127.0.0.1:9/h", "secret": "t" * 20},
            None,
        ),
        lambda s, _: _count(s, "alert_receivers") == 1,
        ("alert_receiver_create",),
        ok=201,
    ),
    ("PATCH", "/alerts/receivers/<name>"): Case(
        lambda s: (f"/alerts/receivers/{_receiver(s)}", {"send_resolved": False}, None),
        lambda s, _: not s.alert_receivers()[0].send_resolved,
        ("alert_receiver_update",),
    ),
    ("DELETE", "/alerts/receivers/<name>"): Case(
        lambda s: (f"/alerts/receivers/{_receiver(s)}", None, None),
        lambda s, _: _count(s, "alert_receivers") == 0,
        ("alert_receiver_delete",),
        ok=204,
    ),
    ("POST", "/alerts/receivers/<name>/test"): Case(
        lambda s: (f"/alerts/receivers/{_receiver(s)}/test", None, None),
        lambda s, _: _count(s, "jobs_hot") == 1,
        ("alert_test",),
        ok=202,
    ),
    ("POST", "/alerts/rules"): Case(
        lambda s: ("/alerts/rules", {"name": "m", "kind": "zombies", "receivers": [_receiver(s)]}, None),
        lambda s, _: _count(s, "alert_rules") == 1,
        ("alert_rule_create",),
        ok=201,
    ),
    ("PATCH", "/alerts/rules/<name>"): Case(
        lambda s: (f"/alerts/rules/{_rule(s)}", {"enabled": False}, None),
        lambda s, _: not s.alert_rules()[0].enabled,
        ("alert_rule_update",),
    ),
    ("DELETE", "/alerts/rules/<name>"): Case(
        lambda s: (f"/alerts/rules/{_rule(s)}", None, None),
        lambda s, _: _count(s, "alert_rules") == 0,
        ("alert_rule_delete",),
        ok=204,
    ),
    ("POST", "/plans/<plan_id>/lease"): Case(
        lambda s: (f"/plans/{(p := _plan(s))[0]}/lease", {"holder": "cron@host:1:ab"}, p[0]),
        lambda s, plan: s.get_plan(plan)["lease_holder"] == "cron@host:1:ab",
        ("plan_lease",),
    ),
    ("POST", "/plans/<plan_id>/release"): Case(
        lambda s: (f"/plans/{(p := _leased(s))}/release", {"holder": "cron@host:1:ab"}, p),
        lambda s, plan: s.get_plan(plan)["lease_holder"] is None,
        ("plan_release",),
    ),
    ("POST", "/plans/<plan_id>/pace"): Case(
        lambda s: (f"/plans/{(p := _plan(s))[0]}/pace", {"rate": 50}, p[0]),
        lambda s, plan: s.get_plan(plan)["rate"] == 50,
        ("plan_pace",),
    ),
    ("POST", "/plans/<plan_id>/notes"): Case(
        lambda s: (
            f"/plans/{(p := _plan(s))[0]}/notes",
            {"event": "plan_halt", "details": {"why": "x"}},
            p[0],
        ),
        lambda s, plan: bool(s.list_audit(plan_id=plan, action="plan_halt").items),
        ("plan_halt",),
    ),
    ("POST", "/plans/<plan_id>/approve"): Case(
        lambda s: (f"/plans/{(p := _plan(s))[0]}/approve", None, p[0]),
        lambda s, plan: s.get_plan(plan)["approved_by"] is not None,
        ("plan_approve",),
    ),
    ("POST", "/schedules"): Case(
        lambda s: ("/schedules", {"name": "matrix", "type": "matrix.v1", "cron": "*/5 * * * *"}, None),
        lambda s, _: scalar(s, "SELECT count(*) FROM schedules WHERE name = 'matrix'") == 1,
        ("schedule_create",),
        ok=201,
    ),
    ("PATCH", "/schedules/<name>"): Case(
        lambda s: (f"/schedules/{_schedule(s)}", {"priority": 3, "tz": "Europe/Berlin"}, None),
        lambda s, _: (s.get_schedule("matrix").priority, s.get_schedule("matrix").tz) == (3, "Europe/Berlin"),
        ("schedule_update",),
    ),
    ("DELETE", "/schedules/<name>"): Case(
        lambda s: (f"/schedules/{_schedule(s)}", None, None),
        lambda s, _: scalar(s, "SELECT count(*) FROM schedules") == 0,
        ("schedule_delete",),
        ok=204,
    ),
    ("POST", "/schedules/<name>/pause"): Case(
        lambda s: (f"/schedules/{_schedule(s)}/pause", None, None),
        lambda s, _: s.get_schedule("matrix").paused,
        ("schedule_pause",),
    ),
    ("POST", "/schedules/<name>/resume"): Case(
        lambda s: (f"/schedules/{_schedule(s, paused=True)}/resume", None, None),
        lambda s, _: not s.get_schedule("matrix").paused,
        ("schedule_resume",),
    ),
    ("POST", "/schedules/<name>/trigger"): Case(
        lambda s: (f"/schedules/{_schedule(s)}/trigger", None, None),
        lambda s, _: scalar(s, "SELECT count(*) FROM jobs_hot WHERE tags = 'schedule:matrix'") == 1,
        ("schedule_trigger",),
        ok=201,
    ),
}


def mutating_routes() -> list[tuple[str, str]]:
    return sorted(k for k in route_table.ROUTES if k[0] != "GET" and k not in READ_ONLY)


def route_params() -> list[Any]:
    """The mutating routes; one acting on what only PostgreSQL has is not collected for SQLite."""
    return [
        pytest.param(r, marks=[pytest.mark.postgres_only] if r in CASES and CASES[r].postgres_only else [])
        for r in mutating_routes()
    ]


def test_every_mutating_route_of_the_route_map_has_a_case(app):
    served = {(m, r[len(PREFIX) :]) for m, r in routes(app)}
    assert set(mutating_routes()) <= served
    assert set(mutating_routes()) == set(CASES), set(mutating_routes()) ^ set(CASES)


@pytest.fixture
def matrix(store, tokens, bound_app) -> ApiClient:
    # Fetched jobs count as abandoned after 30 s, so POST /rescue has something to change.
    settings = store_settings(store).with_overrides({"recovery.fetched_job_timeout": 30})
    return ApiClient(bound_app(settings, store=store), tokens)


def store_settings(store: Store) -> Any:
    from chokaq_ops.settings import Settings

    return Settings().with_overrides({"storage.url": store.url, **TEST_SETTINGS})


def expected_status(route: tuple[str, str], caller: str | None, ok: int) -> int:
    if caller is None:
        return 401
    rule = route_table.ROUTES[route]
    needed = "admin" if route == ("POST", "/dlq/purge") else rule.role
    return ok if route_table.ROLES.index(caller) >= route_table.ROLES.index(needed) else 403


def audit_rows(store: Store) -> list[tuple[Any, ...]]:
    return sql(store, "SELECT actor, action, plan_id FROM audit_log WHERE actor <> 'creator' ORDER BY id")


def reset(store: Store) -> None:
    tables = ("audit_log", "plan_items", "plans", "jobs_hot", "jobs_dlq", "jobs_archive", "events")
    for table in (*tables, "alert_rules", "alert_receivers", "schedule_runs", "schedules"):
        sql(store, f"DELETE FROM {table}")
    sql(store, "UPDATE queues SET paused = ? WHERE name = 'default'", False)


@pytest.mark.parametrize("route", route_params(), ids=lambda r: f"{r[0]} {r[1]}")
def test_each_role_gets_its_status_and_an_allowed_call_is_audited(matrix, store, route):
    case = CASES[route]
    for caller in CALLERS:
        reset(store)
        path, body, state = case.arrange(store)
        r = matrix.request(route[0], path, role=caller, **({"json": body} if body is not None else {}))
        want = expected_status(route, caller, case.ok)
        assert r.status_code == want, (route, caller, r.status_code, r.json)
        rows = audit_rows(store)
        if want >= 400:
            assert not case.changed(store, state) and rows == [], (route, caller, rows)
            continue
        assert case.changed(store, state), (route, caller)
        assert {a for _, a, _ in rows} == set(case.actions), (route, caller, rows)
        assert {actor for actor, _, _ in rows} == {caller}, rows  # the token's name, nothing else
        plan_ids = {p for _, _, p in rows}
        if "/plans" in route[1]:
            assert plan_ids <= set(scalar_plans(store)) and None not in plan_ids, rows
        else:
            assert plan_ids == {None}, rows


def scalar_plans(store: Store) -> list[str]:
    return [r[0] for r in sql(store, "SELECT id FROM plans")]


@pytest.mark.parametrize("route", route_params(), ids=lambda r: f"{r[0]} {r[1]}")
def test_a_failure_after_the_audit_insert_leaves_neither_change_nor_audit_row(matrix, store, route):
    case = CASES[route]
    reset(store)
    path, body, state = case.arrange(store)
    with failing_audited_commits(store):
        r = matrix.request(route[0], path, role="admin", **({"json": body} if body is not None else {}))
    assert r.status_code >= 500, (route, r.status_code, r.json)
    assert set(r.json) == {"code", "status", "message", "errors"}
    assert "injected" not in r.json["message"]  # the database's text stays in the log
    assert audit_rows(store) == [], route
    assert not case.changed(store, state), f"{route}: the change committed without its audit row"


@contextmanager
def failing_audited_commits(store: Store) -> Iterator[None]:
    """Every transaction that inserted an audit row fails when it ends, after all its statements ran.

    PostgreSQL: a deferred constraint trigger on audit_log raises at commit (also of a single statement
    in autocommit). SQLite has no deferred triggers: its commit is wrapped to fail when audit_log grew
    since the transaction began (its audited operations all run in BEGIN ... COMMIT transactions)."""
    if is_pg(store):
        sql(
            store,
            "CREATE FUNCTION matrix_fail() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'injected failure after the audit insert'; END $$",
        )
        sql(
            store,
            "CREATE CONSTRAINT TRIGGER matrix_fail AFTER INSERT ON audit_log DEFERRABLE INITIALLY DEFERRED"
            " FOR EACH ROW EXECUTE FUNCTION matrix_fail()",
        )
        try:
            yield
        finally:
            sql(store, "DROP TRIGGER matrix_fail ON audit_log")
            sql(store, "DROP FUNCTION matrix_fail()")
        return
    dialect = type(store.dialect)  # the class: stores opened by a CLI command in this process too
    begin, commit = dialect.begin, dialect.commit
    marks: dict[int, int] = {}

    def newest(conn: Any) -> int:
        return conn.execute("SELECT coalesce(max(id), 0) FROM audit_log").fetchone()[0]

    def begin_marked(self: Any, conn: Any, write: bool) -> None:
        begin(self, conn, write)
        marks[id(conn)] = newest(conn)

    def commit_or_fail(self: Any, conn: Any) -> None:
        if newest(conn) > marks.pop(id(conn), 0):
            raise sqlite3.OperationalError("injected failure after the audit insert")
        commit(self, conn)

    dialect.begin, dialect.commit = begin_marked, commit_or_fail  # type: ignore[method-assign]
    try:
        yield
    finally:
        dialect.begin, dialect.commit = begin, commit  # type: ignore[method-assign]


def test_cli_token_create_and_revoke_audit_in_the_same_transaction(store, capsys):
    from chokaq_ops.cli import main

    url = store.url
    assert main(["token", "create", "ci-bot", "--role", "reader", "--db", url]) == 0
    assert main(["token", "revoke", "ci-bot", "--db", url]) == 0
    actions = [r["action"] for r in store.list_audit(actor=cli_actor().name).items]
    assert actions == ["token_revoke", "token_create"]
    reset(store)
    with failing_audited_commits(store):
        assert main(["token", "create", "ci-bot-2", "--role", "reader", "--db", url]) != 0
    assert scalar(store, "SELECT count(*) FROM api_tokens WHERE name = 'ci-bot-2'") == 0
    assert main(["token", "create", "ci-bot-3", "--role", "reader", "--db", url]) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1]
    with failing_audited_commits(store):
        assert main(["token", "revoke", "ci-bot-3", "--db", url]) != 0
    assert store.verify_token(token) is not None  # the revoke rolled back with its audit row
    assert [r["action"] for r in store.list_audit(actor=cli_actor().name).items] == ["token_create"]
