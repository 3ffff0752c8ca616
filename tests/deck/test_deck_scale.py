"""The Deck over a million dead jobs: how fast the DLQ panel's first page and the Inspector render, measured
in the browser (performance.now() around the click, until the rows / the Inspector are on screen).

A measurement, not a CI test: it runs only with CHOKAQ_DECK_SCALE_ROWS set (e.g. 1000000), seeds with the
DLQ benches' SQL (chokaq_ops/bench/dlq_seed.py), prints one JSON line per dialect, and asserts nothing
but generous sanity bounds. The figures are reported in docs/deck.md.

    CHOKAQ_DECK_SCALE_ROWS=1000000 .venv/bin/python -m pytest tests/deck/test_deck_scale.py -s
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import pytest

from chokaq_ops.bench.dlq_seed import seed
from chokaq_ops.bench.harness import BenchDb
from chokaq_ops.models import Actor
from chokaq_ops.settings import Settings
from tests.deck.conftest import Console
from tests.support.served import Served

ROWS = int(os.environ.get("CHOKAQ_DECK_SCALE_ROWS", "0") or 0)
RUNS = 7

pytestmark = [
    pytest.mark.slow,
    pytest.mark.deck_scale,
    pytest.mark.skipif(not ROWS, reason="a measurement: set CHOKAQ_DECK_SCALE_ROWS (e.g. 1000000) to run it"),
]

OPEN_DLQ = """async () => {
    const t0 = performance.now();
    document.querySelector('#nav button[data-panel=dlq]').click();
    const rows = () => document.querySelector('table.dlq-table tbody tr');
    while (!rows()) await new Promise(r => requestAnimationFrame(r));
    return performance.now() - t0;
}"""
OPEN_INSPECTOR = """async (n) => {
    const buttons = document.querySelectorAll('table.dlq-table tbody button.link');
    const id = buttons[n].textContent;
    const t0 = performance.now();
    buttons[n].click();
    const ready = () => {
        const shown = document.querySelector('[data-testid=inspector-id]');
        return shown && shown.textContent === id && document.querySelector('#payload-editor');
    };
    while (!ready()) await new Promise(r => requestAnimationFrame(r));
    return performance.now() - t0;
}"""
GO_OVERVIEW = """async () => {
    document.querySelector('#nav button[data-panel=overview]').click();
    while (!document.querySelector('.panel-overview')) await new Promise(r => requestAnimationFrame(r));
}"""


def test_dlq_first_page_and_inspector_at_scale(db_url, dialect, tmp_path, browser):
    args = argparse.Namespace(settings=Settings().with_overrides({"storage.url": db_url}), force=False)
    with BenchDb(args, "deck") as db:
        seed_s = seed(db, ROWS - ROWS // 10, ROWS // 10)
        token = db.store.create_token("scale", "reader", actor=Actor("test"))
        served = Served(db_url, tmp_path, "scale", "--no-worker", "--no-rescue", "--no-retention")
        console = Console(browser, served.base, token)
        try:
            page = console.page
            first_page, inspector = [], []
            for run in range(RUNS):
                page.evaluate(GO_OVERVIEW)
                console.settled()
                first_page.append(page.evaluate(OPEN_DLQ))
                console.settled()
                inspector.append(page.evaluate(OPEN_INSPECTOR, run % 10))
                console.settled()
            total = page.get_by_test_id("page-info").text_content()
            console.shot("dlq-1m", dialect, height=900)
        finally:
            console.close()
            served.stop()
    result = {
        "bench": "deck",
        "db": dialect,
        "rows": ROWS,
        "seed_seconds": round(seed_s, 1),
        "dlq_first_page_ms": {"median": round(statistics.median(first_page)), "max": round(max(first_page))},
        "inspector_ms": {"median": round(statistics.median(inspector)), "max": round(max(inspector))},
        "runs": RUNS,
        "pager": total,
    }
    print(json.dumps(result))
    assert f"{ROWS:,}" in total  # the exact total, from the trigger-kept counts
    assert statistics.median(first_page) < 10_000 and statistics.median(inspector) < 10_000  # sanity only
