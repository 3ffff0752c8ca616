"""The Deck's Schedules panel in real Chromium against a real `chokaq serve`, on SQLite and PostgreSQL: the
list with next ticks, last run and the newest job's outcome (a schedule of every second declared in code
runs while the page is open), a schedule's next ticks in its own zone and its runs, role-appropriate
controls, an admin's create (a bad cron refused naming the field) and delete, an operator's pause and run
now."""

from __future__ import annotations

import pytest

from tests.support.served import wait_for

pytestmark = pytest.mark.slow

NIGHTLY = {
    "name": "reports.nightly",
    "type": "report.v1",
    "cron": "30 2 * * *",
    "tz": "Europe/Berlin",
    "misfire": "catch_up",
    "catch_up_max": 3,
    "payload": {"region": "eu"},
}


def controls(page) -> set[str]:
    return set(
        page.locator("[data-needs]:not([disabled])").evaluate_all("els => els.map(e => e.dataset.needs)")
    )


def test_the_schedules_panel_lists_runs_and_offers_what_the_role_may_do(deck, monkeypatch):
    monkeypatch.setenv("CHOKAQ_TEST_GRACE", "5")
    deck.serve("--handlers", "tests.support.handlers_schedule", "--concurrency", "2")
    assert deck.call("POST", "/schedules", json=NIGHTLY).status_code == 201
    paused = {**NIGHTLY, "name": "invoices.remind", "type": "invoice.remind.v1", "cron": "0 9 * * 1-5"}
    assert deck.call("POST", "/schedules", json={**paused, "tz": "America/New_York", "paused": True}).ok
    every_second = "soak.every-second"  # declared in code by the handler module the server imported
    wait_for(
        lambda: deck.call("GET", f"/schedules/{every_second}").json().get("last_outcome") == "succeeded",
        30,
        "the code schedule's jobs to run",
    )

    admin = deck.open("admin")
    page = admin.panel("Schedules")
    rows = page.locator("tr[data-schedule]")
    assert rows.evaluate_all("els => els.map(e => e.dataset.schedule)") == [
        "invoices.remind", "reports.nightly", every_second
    ]  # fmt: skip
    nightly = page.locator('tr[data-schedule="reports.nightly"]')
    assert "Europe/Berlin" in nightly.text_content() and "running" in nightly.text_content()
    assert "CET" in nightly.get_by_test_id("next-run").text_content() or "CEST" in nightly.text_content()
    assert "never ran" in nightly.get_by_test_id("last-outcome").text_content()
    remind = page.locator('tr[data-schedule="invoices.remind"]')
    assert "paused" in remind.text_content() and remind.get_by_test_id("next-run").text_content() == "—"
    code = page.locator(f'tr[data-schedule="{every_second}"]')
    code.get_by_test_id("last-outcome").filter(has_text="succeeded").wait_for()
    assert code.locator(".badge", has_text="code").count() == 1
    assert {"schedule_run", "schedule_edit"} <= controls(page)
    admin.shot("schedules", deck.dialect)

    # A schedule's detail: the next five ticks (UTC and its own zone) and its runs with their jobs.
    page.get_by_role("button", name=f"Show schedule {every_second}").click()
    aside = page.locator("aside.inspector")
    runs = aside.get_by_test_id("schedule-runs")
    runs.locator("td", has_text="succeeded").first.wait_for()
    assert aside.get_by_test_id("next-runs").locator("li").count() == 5
    assert runs.get_by_role("button", name="Inspect").count() >= 1
    assert "in code" in aside.text_content() and aside.locator("summary", has_text="Change").count() == 0
    admin.shot("schedule-detail", deck.dialect)

    # An admin creates one: a bad cron is refused naming the field and nothing is made; then it is fixed.
    page.get_by_role("button", name="New schedule").click()
    form = page.get_by_role("form", name="New schedule")
    form.get_by_label("Name").fill("cleanup.hourly")
    form.get_by_label("Job type").fill("cleanup.v1")
    form.get_by_label("Cron").fill("0 * * *")
    form.get_by_role("button", name="Create").click()
    form.locator(".error", has_text="cron").wait_for()
    admin.errors[:] = [e for e in admin.errors if "422" not in e]  # the refused call, as expected
    assert deck.call("GET", "/schedules/cleanup.hourly").status_code == 404
    form.get_by_label("Cron").fill("@hourly")
    form.get_by_role("button", name="Create").click()
    page.locator('tr[data-schedule="cleanup.hourly"]').wait_for()
    assert deck.call("GET", "/schedules/cleanup.hourly").json()["created_by"] == "admin-deck"

    # An operator pauses and runs one now, and is offered no create, change or delete.
    operator = deck.open("operator")
    page = operator.panel("Schedules")
    assert controls(page) == {"schedule_run"}
    assert page.get_by_role("button", name="New schedule").count() == 0
    page.get_by_role("button", name="Pause reports.nightly").click()
    page.get_by_role("button", name="Resume reports.nightly").wait_for()
    assert deck.call("GET", "/schedules/reports.nightly").json()["paused"] is True
    page.get_by_role("button", name="Run reports.nightly now").click()
    page.locator("#toast", has_text="enqueued").wait_for()
    ran = deck.call("GET", "/schedules/reports.nightly/runs").json()
    assert [(r["kind"], r["fired_by"]) for r in ran] == [("manual", "operator-deck")]

    # A reader sees everything and is offered nothing.
    reader = deck.open("reader")
    page = reader.panel("Schedules")
    page.locator('tr[data-schedule="reports.nightly"]').wait_for()
    assert controls(page) == set()
    assert page.locator("button.primary:not([disabled]), button.danger:not([disabled])").count() == 0

    # The admin deletes one, confirming by typing its name.
    page = admin.panel("Schedules")
    page.get_by_role("button", name="Delete cleanup.hourly").click()
    dialog = page.locator("dialog#confirm")
    dialog.get_by_role("textbox").fill("cleanup.hourly")
    dialog.get_by_role("button", name="Confirm").click()
    page.locator('tr[data-schedule="cleanup.hourly"]').wait_for(state="detached")
    assert deck.call("GET", "/schedules/cleanup.hourly").status_code == 404
    actions = [a["action"] for a in deck.call("GET", "/audit", params={"action": "schedule_delete"}).json()]
    assert actions == ["schedule_delete"]
