"""/api/v1/schedules over the Flask app on both databases: the views (next ticks, last outcome, runs),
roles (operator pauses, resumes and triggers; admin creates, changes and deletes), and bad input refused
naming the field with no row changed. Audit rows per route: tests/api/test_audit_matrix.py."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from chokaq_ops.models import Actor
from chokaq_ops.schedules import Schedule
from tests.api.conftest import pagination
from tests.support.dbprobe import scalar, sql

NIGHTLY = {"name": "reports.nightly", "type": "report.v1", "cron": "30 2 * * *", "tz": "Europe/Berlin"}


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_an_admin_creates_a_schedule_and_every_role_reads_it_with_its_next_ticks(client):
    r = client.post(
        "/schedules", json={**NIGHTLY, "payload": {"region": "eu"}, "misfire": "catch_up", "catch_up_max": 3}
    )
    assert r.status_code == 201, r.json
    made = r.json
    assert (made["name"], made["payload"], made["misfire"], made["catch_up_max"]) == (
        "reports.nightly", '{"region":"eu"}', "catch_up", 3
    )  # fmt: skip
    assert made["source"] == "api" and made["created_by"] == "admin" and made["last_outcome"] is None
    ticks = [when(t) for t in made["next_runs"]]
    assert len(ticks) == 5 and ticks[0] == when(made["next_run_at"])
    local = [t.astimezone(ZoneInfo("Europe/Berlin")) for t in ticks]
    assert [d.date() - local[0].date() for d in local] == [timedelta(days=i) for i in range(5)]
    # 02:30 in Berlin each day (03:30 on the day the clocks skip 02:00-02:59, as APScheduler fires it).
    assert {d.strftime("%H:%M") for d in local} <= {"02:30", "03:30"}
    for role in ("reader", "operator", "admin"):
        got = client.get("/schedules/reports.nightly", role=role)
        assert got.status_code == 200 and got.json["cron"] == "30 2 * * *"
    listed = client.get("/schedules", role="reader")
    assert [s["name"] for s in listed.json] == ["reports.nightly"] and pagination(listed)["total"] == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cron": "*/5 * * *"}, "cron"),
        ({"cron": "0 25 * * *"}, "cron"),
        ({"tz": "Europe/Atlantis"}, "tz"),
        ({"name": "has/slash"}, "name"),
        ({"misfire": "sometimes"}, "misfire"),
        ({"catch_up_max": 0}, "catch_up_max"),
        ({"payload": "{not json"}, "payload"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_input_is_a_422_naming_the_field_and_writes_nothing(client, store, body, field):
    r = client.post("/schedules", json={**NIGHTLY, **body})
    assert r.status_code == 422, r.json
    assert field in r.json["errors"]["json"], r.json
    assert scalar(store, "SELECT count(*) FROM schedules") == 0
    assert scalar(store, "SELECT count(*) FROM audit_log WHERE action LIKE 'schedule%'") == 0


def test_a_bad_change_is_a_422_and_leaves_the_schedule_as_it_was(client):
    client.post("/schedules", json=NIGHTLY)
    r = client.patch("/schedules/reports.nightly", json={"cron": "99 * * * *"})
    assert r.status_code == 422 and "cron" in r.json["errors"]["json"]
    r = client.patch("/schedules/reports.nightly", json={"tz": "Mars/Base"})
    assert r.status_code == 422 and "tz" in r.json["errors"]["json"]
    r = client.patch("/schedules/reports.nightly", json={"paused": True})
    assert r.status_code == 422 and "paused" in r.json["errors"]["json"]  # pause has its own route
    assert client.get("/schedules/reports.nightly").json["cron"] == "30 2 * * *"


def test_conflicts_and_unknown_names(client, store):
    assert client.post("/schedules", json=NIGHTLY).status_code == 201
    r = client.post("/schedules", json={**NIGHTLY, "cron": "@daily"})
    assert r.status_code == 409 and "exists" in r.json["message"]
    for method, path in (
        ("GET", "/schedules/nope"),
        ("PATCH", "/schedules/nope"),
        ("DELETE", "/schedules/nope"),
        ("POST", "/schedules/nope/pause"),
        ("POST", "/schedules/nope/resume"),
        ("POST", "/schedules/nope/trigger"),
        ("GET", "/schedules/nope/runs"),
    ):
        r = client.request(method, path, **({"json": {"priority": 1}} if method == "PATCH" else {}))
        assert r.status_code == 404, (method, path, r.json)
        assert r.json["errors"] == {"path": {"name": ["no schedule named 'nope'"]}}
    # A schedule declared in code is changed in the code; operators still pause it.
    store.sync_schedules([Schedule("@hourly", name="from.code").bound("report.v1")], actor=Actor("code:h"))
    r = client.patch("/schedules/from.code", json={"priority": 1})
    assert r.status_code == 409 and "declared in code" in r.json["message"]
    assert client.post("/schedules/from.code/pause", role="operator").json["paused"] is True


def test_an_operator_pauses_resumes_and_triggers_but_does_not_define(client, store):
    client.post("/schedules", json=NIGHTLY)
    assert client.post("/schedules", role="operator", json={**NIGHTLY, "name": "x"}).status_code == 403
    assert (
        client.patch("/schedules/reports.nightly", role="operator", json={"priority": 1}).status_code == 403
    )
    assert client.request("DELETE", "/schedules/reports.nightly", role="operator").status_code == 403
    assert client.post("/schedules/reports.nightly/pause", role="reader").status_code == 403
    paused = client.post("/schedules/reports.nightly/pause", role="operator")
    assert paused.status_code == 200 and paused.json["paused"] and paused.json["next_runs"] == []
    assert paused.json["next_run_at"] is None
    run = client.post("/schedules/reports.nightly/trigger", role="operator")
    assert run.status_code == 201 and run.json["kind"] == "manual" and run.json["fired_by"] == "operator"
    job = client.get(f"/jobs/{run.json['job_id']}", role="reader").json
    assert (job["type"], job["created_by"], job["tags"]) == (
        "report.v1",
        "operator",
        "schedule:reports.nightly",
    )
    resumed = client.post("/schedules/reports.nightly/resume", role="operator").json
    assert not resumed["paused"] and len(resumed["next_runs"]) == 5
    assert resumed["last_job_id"] == run.json["job_id"] and resumed["last_outcome"] == "pending"
    actions = [r["action"] for r in client.get("/audit", role="reader").json]
    assert actions[:3] == ["schedule_resume", "schedule_trigger", "schedule_pause"]


def test_runs_are_paged_newest_first_with_their_jobs(client, store):
    client.post("/schedules", json=NIGHTLY)
    jobs = [client.post("/schedules/reports.nightly/trigger").json["job_id"] for _ in range(3)]
    page = client.get("/schedules/reports.nightly/runs?page_size=2", role="reader")
    assert page.status_code == 200 and pagination(page)["total"] == 3
    assert [r["job_id"] for r in page.json] == jobs[::-1][:2]
    assert {r["outcome"] for r in page.json} == {"pending"}
    sql(store, "DELETE FROM jobs_hot")
    assert client.get("/schedules/reports.nightly", role="reader").json["last_outcome"] == "gone"


def test_delete_removes_the_schedule_and_its_runs(client, store):
    client.post("/schedules", json=NIGHTLY)
    client.post("/schedules/reports.nightly/trigger")
    r = client.request("DELETE", "/schedules/reports.nightly")
    assert r.status_code == 204 and r.data == b""
    assert client.get("/schedules/reports.nightly").status_code == 404
    assert scalar(store, "SELECT count(*) FROM schedule_runs") == 0


def test_the_list_filters_by_type_paused_and_source(client, store):
    client.post("/schedules", json=NIGHTLY)
    client.post("/schedules", json={**NIGHTLY, "name": "other", "type": "other.v1", "paused": True})
    store.sync_schedules([Schedule("@hourly", name="from.code").bound("report.v1")], actor=Actor("code:h"))

    def names(query: str) -> list[str]:
        r = client.get(f"/schedules?{query}", role="reader")
        assert r.status_code == 200, r.json
        return [s["name"] for s in r.json]

    assert names("") == ["from.code", "other", "reports.nightly"]
    assert names("type=report.v1") == ["from.code", "reports.nightly"]
    assert names("paused=true") == ["other"]
    assert names("source=code") == ["from.code"]
    assert client.get("/schedules?source=somewhere", role="reader").status_code == 422
