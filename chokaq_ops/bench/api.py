"""api: p50/p95 latency of `GET /api/v1/dlq` pages over N dead jobs, through a real `chokaq serve` process.

The DLQ is seeded in SQL (bench_seed_dlq: N dead jobs over the last week, 4 queues, a quarter of them
MaxRetriesExceeded, the rest Zombie), then a served API (waitress, no engine) is asked over HTTP with a
reader token and a keep-alive session for:

- `deep`: pages spread evenly from the first to the last of the unfiltered list (newest failure first),
  so OFFSET and the X-Pagination count are paid for the whole range;
- `filtered`: the same spread over `reason=Zombie&queue=bench.q1`;
- `first`: page 1 of the unfiltered list (what a dashboard polls);
- `at`: page `--at-page` (default 1,000) of the unfiltered list, again and again (an operator paging
  far in: the data-growth curve's deep page).

Every request is timed on the client (connect reuse, JSON parse included); each scenario reports p50
and p95 over all its requests, one record per run, then the median over runs.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from chokaq_ops.bench import dlq_seed
from chokaq_ops.bench.harness import BenchDb, BenchFailed, expect, percentile
from chokaq_ops.models import Actor

FILTER = {"reason": "Zombie", "queue": "bench.q1"}
# (name, filter or None for one page asked again and again, whether that page is --at-page or 1)
SCENARIOS: tuple[tuple[str, dict[str, str] | None, bool], ...] = (
    ("deep", {}, False),
    ("filtered", FILTER, False),
    ("first", None, False),
    ("at", None, True),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(rows=1_000_000)
    parser.add_argument("--pages", type=int, default=40, metavar="K", help="pages per scenario (default 40)")
    parser.add_argument("--page-size", type=int, default=100, metavar="N", help="page size (default 100)")
    parser.add_argument(
        "--at-page", type=int, default=1000, metavar="K", help="the `at` scenario's page (default 1000)"
    )


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rows = int(args.rows)
    noise = rows // 4
    with BenchDb(args, "api") as db:
        seed_s = dlq_seed.seed(db, rows - noise, noise)
        reader = f"bench-api-{secrets.token_hex(4)}"  # token names stay taken after a revoke
        token = db.store.create_token(reader, "reader", actor=Actor("bench"))
        try:
            with Served(db.store.url) as api:
                session = api.session(token)
                for n in range(1, args.repeat + 1):
                    for scenario, params, at in SCENARIOS:
                        page = args.at_page if at else 1
                        ms = measure(session, api.base, params, args.pages, args.page_size, page)
                        yield db.record(
                            rows,
                            scenario=scenario,
                            run=n,
                            requests=len(ms),
                            page_size=args.page_size,
                            page=None if params is not None else page,
                            p50_ms=round(percentile(ms, 50), 2),
                            p95_ms=round(percentile(ms, 95), 2),
                            max_ms=round(max(ms), 2),
                            seed_seconds=round(seed_s, 2),
                        )
        finally:
            db.store.revoke_token(reader, actor=Actor("bench"))
        for scenario, _, _ in SCENARIOS:
            yield db.summary(("p50_ms", "p95_ms", "max_ms"), where={"scenario": scenario})


def measure(
    session: Any, base: str, params: dict[str, str] | None, pages: int, page_size: int, page: int = 1
) -> list[float]:
    """Latencies (ms) of `pages` requests spread over the whole list; `params` None: page `page`
    repeatedly (refused when the list has fewer pages)."""
    query = {} if params is None else dict(params)
    first = session.get(f"{base}/dlq", params={**query, "page_size": page_size}, timeout=60)
    expect(first.status_code == 200, f"GET /dlq answered {first.status_code}: {first.text[:300]}")
    total_pages = int(json.loads(first.headers["X-Pagination"])["total_pages"])
    expect(total_pages > 0, "the seeded DLQ is empty")
    if params is None:
        expect(page <= total_pages, f"page {page} asked of a list of {total_pages} pages")
        wanted = [page] * pages
    else:
        wanted = [1 + round(i * (total_pages - 1) / max(1, pages - 1)) for i in range(pages)]
    out = []
    for page in wanted:
        start = time.perf_counter()
        r = session.get(f"{base}/dlq", params={**query, "page": page, "page_size": page_size}, timeout=60)
        items = r.json()
        out.append((time.perf_counter() - start) * 1000)
        expect(
            r.status_code == 200 and len(items) > 0, f"page {page}: {r.status_code} with {len(items)} items"
        )
    return out


class Served:
    """`chokaq serve` (API only) on a free port, stopped by its pid on exit."""

    def __init__(self, url: str, threads: int = 4) -> None:
        self.url = url
        self.threads = threads
        self.proc: subprocess.Popen[str] | None = None
        self.base = ""

    def __enter__(self) -> Served:
        cmd = [
            sys.executable, "-c", "import sys; from chokaq_ops.cli import main; sys.exit(main())",
            "--log-level", "WARNING", "serve", "--db", self.url, "--port", "0",
            "--no-worker", "--no-rescue", "--no-retention", "--threads", str(self.threads),
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "serving http://" not in line:
            self.proc.kill()
            raise BenchFailed(f"chokaq serve did not start: {line!r}")
        self.base = line.split("serving ", 1)[1].split()[0]
        return self

    def session(self, token: str) -> Any:
        import requests

        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {token}"
        return s

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
