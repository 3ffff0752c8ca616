"""The Deck in real Chromium against a real `chokaq serve`, on SQLite and PostgreSQL: the operator's fix-and-
resurrect workflow by clicks, role-aware controls, hostile text staying text under a strict CSP, a bulk
resurrect plan with progress, and live arrivals without reload."""

from __future__ import annotations

import contextlib
import json
import time

import pytest

from chokaq_ops.models import Actor, FailureReason
from tests.api.conftest import to_dlq
from tests.support.served import FAST_TOML, wait_for

pytestmark = pytest.mark.slow

# The operator story's payload: a comma missing after "subject" (line 3).
MALFORMED = '{\n  "to": "user@example.com",\n  "subject": "Welcome!"\n  "body": "Hello, World!"\n}'
FIXED = MALFORMED.replace('"Welcome!"\n', '"Welcome!",\n')
HOSTILE = "<img src=x onerror=alert(1)>"
SCRIPT_END = "</script><script>alert(2)</script>"


def test_seed_workflow_by_clicks(deck):
    deck.serve("--handlers", "tests.support.handlers_e2e", "--concurrency", "2")
    r = deck.call(
        "POST", "/jobs", "operator", json={"type": "email.send.v1", "queue": "mail", "payload": MALFORMED}
    )
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    wait_for(lambda: deck.call("GET", f"/jobs/{job_id}").json()["location"] == "dlq", 20, "the job to die")

    console = deck.open("operator")
    page = console.panel("DLQ")
    page.get_by_label("Reason").select_option("Fatal")
    page.get_by_role("button", name="Filter").click()
    page.get_by_role("button", name=f"Inspect {job_id}").click()
    inspector = page.locator("aside.inspector")
    # The Inspector shows the parse error with its traceback and every field of the Inspector's table.
    details = inspector.get_by_test_id("error-details")
    assert "Expecting ',' delimiter" in details.text_content()
    assert "Traceback" in details.text_content()
    for label in ("Job ID", "Type", "Queue", "Failure Reason", "Attempts", "Failed At", "Worker ID", "Tags"):
        assert inspector.get_by_text(label, exact=True).count() == 1, label
    assert inspector.locator("dd", has_text="Fatal").count() == 1
    # The editor flags the missing comma before anything is typed, and refuses to save it.
    editor = inspector.get_by_role("textbox", name="Payload (editable JSON)")
    status = inspector.locator("#payload-status")
    assert "missing comma" in status.text_content() and "Line 3, column 24" in status.text_content()
    assert editor.get_attribute("aria-invalid") == "true"
    assert inspector.get_by_role("button", name="Save & Resurrect").is_disabled()
    console.shot("inspector-missing-comma", deck.dialect, focus=status, height=1300)
    # Fix it by keyboard: jump to the error, type the comma.
    status.get_by_role("button", name="Line 3, column 24").click()
    page.keyboard.type(",")
    assert status.text_content() == "Valid JSON"
    assert editor.get_attribute("aria-invalid") == "false"
    inspector.get_by_label("Priority after resurrection").fill("30")
    inspector.get_by_role("button", name="Save & Resurrect").click()
    page.locator("#toast", has_text="resurrected").wait_for()

    done = wait_for(
        lambda: (j := deck.call("GET", f"/jobs/{job_id}").json())["location"] == "archive" and j,
        20,
        "the fixed job to be archived",
    )
    assert done["payload"] == FIXED  # exactly the text typed in the editor
    assert (
        json.loads((deck.workdir / "sent.jsonl").read_text().splitlines()[0])["payload"]["body"]
        == "Hello, World!"
    )
    trail = deck.call("GET", "/audit", params={"job_id": job_id}).json()
    assert [(a["action"], a["actor"]) for a in reversed(trail)][-2:] == [
        ("edit_dlq", "operator-deck"),
        ("resurrect", "operator-deck"),
    ]
    # The console's Inspector and Audit panel show the same trail, by the token's name.
    inspector.get_by_test_id("job-audit").locator("li", has_text="resurrect").wait_for()
    history = inspector.get_by_test_id("job-audit").text_content()
    assert "edit_dlq by operator-deck" in history and "resurrect by operator-deck" in history
    page = console.panel("Audit")
    page.get_by_label("Job").fill(job_id)
    page.get_by_role("button", name="Filter").click()
    entry = page.locator("ol.audit li", has_text="edit_dlq")
    entry.wait_for()
    assert entry.locator(".actor").text_content() == "operator-deck"
    # Before: the stored text verbatim (it is not JSON); after: the fix, pretty-printed.
    assert entry.locator('pre[data-side="before"]').first.text_content() == MALFORMED
    assert entry.locator('pre[data-side="after"]').first.text_content() == FIXED
    console.shot("audit-before-after", deck.dialect)


def _visit_everything(console, job_id):
    page = console.panel("DLQ")
    page.get_by_role("button", name=f"Inspect {job_id}").click()
    page.get_by_test_id("error-details").wait_for()
    for name in ("Overview", "Queues", "Workers", "Schedules", "Jobs", "Error groups", "Bulk plans", "Audit"):
        console.panel(name)
        yield name, page
    page = console.panel("DLQ")
    page.get_by_role("button", name=f"Inspect {job_id}").click()
    page.get_by_test_id("error-details").wait_for()
    page.get_by_role("checkbox", name=f"Select {job_id}").check()
    yield "DLQ", page


def enabled_mutations(page):
    return page.locator("[data-needs]:not([disabled])").evaluate_all("els => els.map(e => e.dataset.needs)")


def test_roles_reader_and_operator(deck):
    deck.serve("--no-worker")
    [job_id] = to_dlq(deck.store, 1, queue="mail", reason=FailureReason.Zombie, payload={"a": 1})
    deck.call("PATCH", "/queues/mail", json={"paused": False})

    reader = deck.open("reader")
    seen = {}
    for name, page in _visit_everything(reader, job_id):
        seen[name] = enabled_mutations(page)
        assert page.locator("button.primary:not([disabled]), button.danger:not([disabled])").count() == 0, (
            name
        )
    assert all(not v for v in seen.values()), seen
    assert reader.page.get_by_role("textbox", name="Payload").get_attribute("readonly") is not None
    reader.shot("reader-dlq", deck.dialect)

    operator = deck.open("operator")
    offered = set()
    for name, page in _visit_everything(operator, job_id):
        assert page.locator("[data-needs=purge], [data-needs=queue_limits]").count() == 0, name
        offered |= set(enabled_mutations(page))
    assert {"edit", "resurrect", "plan", "pause"} <= offered  # the operator's own controls are there

    admin = deck.open("admin")
    page = admin.panel("DLQ")
    page.get_by_role("button", name=f"Inspect {job_id}").click()
    assert page.get_by_role("button", name="Purge…").is_enabled()  # the same view offers purge to admins


def test_hostile_text_stays_text(deck):
    api = deck.serve("--no-worker")
    payload = {"html": HOSTILE, "end": SCRIPT_END}
    error = f"ValueError: {HOSTILE} {SCRIPT_END}\nTraceback: {HOSTILE}"
    [job_id] = to_dlq(
        deck.store,
        1,
        queue=HOSTILE,
        type=f"t{SCRIPT_END}",
        reason=FailureReason.Fatal,
        error=error,
        payload=payload,
        tags=f"{HOSTILE},{SCRIPT_END}",
    )
    # The console's page and every asset carry the strict policy.
    page_headers = api.session.get(api.base + "/deck/").headers
    csp = page_headers["Content-Security-Policy"]
    for part in (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "object-src 'none'",
    ):
        assert part in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp and "*" not in csp
    assert page_headers["X-Content-Type-Options"] == "nosniff"

    deck.store.create_schedule(
        {"name": "hostile", "type": f"t{SCRIPT_END}", "cron": "@daily", "payload": payload, "tags": HOSTILE},
        actor=Actor("test"),
    )
    console = deck.open("admin")
    assert console.response.headers["content-security-policy"] == csp
    page = console.page
    for name in ("Overview", "Queues", "Schedules", "Jobs", "Error groups", "Audit", "DLQ"):
        console.panel(name)
        page.wait_for_timeout(300)
    page.get_by_role("button", name=f"Inspect {job_id}").click()
    page.get_by_test_id("error-details").wait_for()
    # Shown as text, verbatim...
    assert page.locator("table.dlq-table td", has_text=HOSTILE).count() >= 1  # the queue name
    assert HOSTILE in page.get_by_test_id("error-details").text_content()
    assert SCRIPT_END in page.get_by_role("textbox", name="Payload (editable JSON)").input_value()
    assert page.get_by_label("Tags").input_value() == f"{HOSTILE},{SCRIPT_END}"
    console.panel("Error groups")
    page.locator(".group").first.wait_for()
    console.panel("Overview")
    page.locator("td", has_text=HOSTILE).first.wait_for()
    # ...and never as markup: no injected element, no script beyond the console's own module, no alert.
    assert page.locator("img").count() == 0
    assert page.locator("script").count() == 1
    assert page.evaluate("document.querySelectorAll('[onerror]').length") == 0
    page.wait_for_timeout(300)
    assert console.dialogs == []


def test_bulk_resurrect_plan_with_progress_and_live_arrivals(deck):
    deck.serve("--no-worker")
    zombies = to_dlq(
        deck.store,
        2500,
        queue="zombies",
        reason=FailureReason.Zombie,
        error="Zombie detected: heartbeat expired",
    )
    to_dlq(deck.store, 20, queue="zombies", reason=FailureReason.Fatal)  # the filter must leave these alone
    console = deck.open("operator")
    page = console.panel("DLQ")
    page.get_by_label("Reason").select_option("Zombie")
    page.get_by_role("button", name="Filter").click()
    page.get_by_test_id("page-info").filter(has_text="2,500 jobs").wait_for()
    page.get_by_role("checkbox", name="Select every job on this page").check()
    page.get_by_role("button", name="Select all 2,500 matching the filter").click()
    assert "2,500 selected" in page.get_by_test_id("selection-count").text_content()
    page.get_by_role("button", name="Plan resurrect…").click()
    page.get_by_label("Jobs per chunk").fill("500")
    page.get_by_role("button", name="Preview plan").click()
    detail = page.locator(".plan-detail")
    detail.locator(".breakdown", has_text="By reason").locator("li", has_text="Zombie").wait_for()
    assert "2,500" in detail.locator(".breakdown", has_text="By reason").text_content()
    assert (
        deck.call("GET", "/dlq", params={"reason": "Zombie", "page_size": 1})
        .headers["X-Pagination"]
        .find('"total": 2500')
        >= 0
    )
    console.shot("plan-preview", deck.dialect)
    # Watch the progress text change while the plan runs, chunk by chunk.
    page.evaluate("""() => {
        window.__progress = [];
        const el = document.querySelector('[data-testid=plan-progress-text]');
        new MutationObserver(() => window.__progress.push(el.textContent))
            .observe(el, {childList: true, characterData: true, subtree: true});
    }""")
    page.get_by_role("button", name="Execute").click()
    page.get_by_label("Type resurrect 2500 to confirm").fill("resurrect 2500")
    page.get_by_role("button", name="Confirm").click()
    page.locator("#toast", has_text="finished").wait_for(timeout=60_000)
    seen = page.evaluate("window.__progress")
    steps = [s for s in seen if s.startswith("running")]
    assert len(steps) >= 3, seen  # 500, 1,000, ... shown as they happened
    assert "done: 2,500 done, 0 skipped of 2,500" in page.get_by_test_id("plan-progress-text").text_content()
    console.shot("plan-done", deck.dialect)
    hot = deck.call("GET", "/jobs", params={"queue": "zombies", "page_size": 1})
    assert json.loads(hot.headers["X-Pagination"])["total"] == len(zombies)
    assert (
        json.loads(
            deck.call("GET", "/dlq", params={"queue": "zombies", "page_size": 1}).headers["X-Pagination"]
        )["total"]
        == 20
    )

    console.panel("Overview")
    console.shot("overview", deck.dialect)
    console.panel("Error groups").locator(".group").first.wait_for()
    console.shot("error-groups", deck.dialect)

    # Live: with the DLQ panel open, a job that dies now appears without a reload.
    page = console.panel("DLQ")
    page.locator("table.dlq-table tbody tr").first.wait_for()
    page.evaluate("window.__sameDocument = true")
    started = time.monotonic()
    [fresh] = to_dlq(deck.store, 1, queue="live", reason=FailureReason.Fatal, error="RuntimeError: fresh")
    page.locator(f'tr[data-id="{fresh}"]').wait_for(timeout=2000)
    elapsed = time.monotonic() - started
    assert page.evaluate("window.__sameDocument") is True  # no reload happened
    assert elapsed <= 2.0, elapsed
    console.shot("dlq-live", deck.dialect)


def test_four_eyes_approval_of_a_plan(deck):
    config = deck.workdir / "chokaq.toml"
    config.write_text(FAST_TOML.replace("[Api]\n", "[Api]\nPlanApprovalMinJobs = 3\n"))
    deck.serve("--no-worker")
    to_dlq(deck.store, 3, queue="mail", reason=FailureReason.Timeout)
    operator = deck.open("operator")
    page = operator.panel("DLQ")
    page.get_by_role("checkbox", name="Select every job on this page").check()
    page.get_by_role("button", name="Plan resurrect…").click()
    page.get_by_role("button", name="Preview plan").click()
    plan_id = page.locator(".plan-detail h2 .mono").text_content()
    assert page.get_by_role("button", name="Approve").count() == 0  # not by its own creator
    page.get_by_role("button", name="Execute").click()
    page.locator("#toast", has_text="a second person must approve it first").wait_for()
    operator.errors[:] = [e for e in operator.errors if "409" not in e]  # the refused call, as expected
    assert deck.call("GET", f"/plans/{plan_id}").json()["state"] == "ready"

    admin = deck.open("admin")
    page = admin.panel("Bulk plans")
    page.get_by_role("button", name=f"Open plan {plan_id}").click()
    page.get_by_role("button", name="Approve").click()
    page.locator(".facts dd", has_text="admin-deck at").wait_for()

    page = operator.panel("Bulk plans")
    page.get_by_role("button", name=f"Open plan {plan_id}").click()
    page.get_by_role("button", name="Execute").click()
    page.locator("#toast", has_text="finished").wait_for()
    plan = deck.call("GET", f"/plans/{plan_id}").json()
    assert (plan["state"], plan["done"], plan["approved_by"]) == ("done", 3, "admin-deck")


JSON_CASES = [  # text, expected error (line, column, words) or None when valid
    (MALFORMED, (3, 24, "missing comma")),
    (FIXED, None),
    ('{"a": [1, 2, {"b": null}], "c": "x\\u0041"}', None),
    ("[1 2]", (1, 3, "after array element")),
    ('{"a": 1,}', (1, 9, "property name in double quotes")),
    ('{"a" 1}', (1, 6, "':' after property name")),
    ('"open', (1, 1, "Unterminated string")),
    ('{"a": 1} x', (1, 10, "after the JSON value")),
    ("", (1, 1, "Expected a value")),
    ("[01]", (1, 3, "after array element")),
]


def test_payload_checker_points_at_the_error(deck):
    """The editor's JSON checker, run in the browser: valid JSON passes, and each error has its place."""
    deck.serve("--no-worker")
    page = deck.open("reader").page
    results = page.evaluate(
        """async (cases) => {
            const { checkJson } = await import('./jsoncheck.js');
            return cases.map((text) => checkJson(text));
        }""",
        [text for text, _ in JSON_CASES],
    )
    for (text, expected), got in zip(JSON_CASES, results, strict=True):
        if expected is None:
            assert got["ok"] and got["value"] == json.loads(text), text
        else:
            line, column, words = expected
            assert not got["ok"], text
            assert (got["error"]["line"], got["error"]["column"]) == (line, column), (text, got)
            assert words in got["error"]["message"], (text, got)


@pytest.mark.postgres_only
def test_the_horizon_banner_names_the_holder_and_only_an_admin_ends_it(deck):
    """A notebook keeps a snapshot open: every role sees the banner with its session; an admin ends the
    session after typing its pid, and the banner goes (PostgreSQL; SQLite shows its pinned log instead)."""
    from chokaq_ops.storage.dialects import from_url
    from tests.deck.conftest import SHOTS

    (deck.workdir / "chokaq.toml").write_text(FAST_TOML + '\n[Health]\nHorizonDegraded = "1s"\n')
    deck.serve("--no-worker")
    notebook = from_url(deck.db_url).connect()
    notebook.autocommit = False
    cur = notebook.cursor()
    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    cur.execute("SET LOCAL application_name = 'triage-notebook'")
    cur.execute("SELECT count(*) FROM jobs_archive")
    cur.fetchall()
    cur.execute("SELECT pg_backend_pid()")
    pid = int(cur.fetchone()[0])
    time.sleep(1.2)
    try:
        reader = deck.open("reader")
        banner = reader.page.locator("#horizon")
        banner.wait_for()
        assert f"pid {pid}" in banner.text_content() and "triage-notebook" in banner.text_content()
        assert banner.get_by_role("button").count() == 0  # a reader sees who, not how to end it
        admin = deck.open("admin")
        banner = admin.page.locator("#horizon")
        banner.get_by_role("button", name="End this session…").wait_for()
        SHOTS.mkdir(parents=True, exist_ok=True)
        admin.page.screenshot(path=str(SHOTS / "horizon-banner.png"))
        banner.get_by_role("button", name="End this session…").click()
        admin.page.get_by_label(f"Type {pid} to confirm").fill(str(pid))
        admin.page.get_by_role("button", name="Confirm").click()
        admin.page.locator("#toast", has_text="released its snapshot").wait_for()
        banner.wait_for(state="hidden")
        trail = [a["action"] for a in deck.call("GET", "/audit").json() if a["action"].endswith("_session")]
        assert sorted(trail) == ["cancel_session", "terminate_session"]
    finally:
        with contextlib.suppress(Exception):
            notebook.close()
