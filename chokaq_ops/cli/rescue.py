"""`chokaq rescue`: run one zombie-rescue sweep now and print its counts.

Phase 1 returns fetched jobs untouched for Recovery.FetchedJobTimeout to pending (attempts unchanged);
phase 2 moves processing jobs whose heartbeat is older than the queue's zombie timeout (else
Recovery.ProcessingZombieTimeout) to the dead-letter queue as Zombie. The sweep ignores the rescue lease:
it is safe next to the scheduled sweeps of running workers.
"""

from __future__ import annotations

import argparse

from chokaq_ops.cli import common
from chokaq_ops.cli.token import cli_actor
from chokaq_ops.engine.rescue import sweep_now
from chokaq_ops.storage.migrate import require_current


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rescue",
        help="run one zombie-rescue sweep now and print its counts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common.add_common(p)
    common.add_format(p, default="table")
    p.add_argument("--ids", action="store_true", help="also list the ids that moved (table format)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = common.settings_from(args)
    with common.open_store(args, settings) as store:
        require_current(store)
        report = sweep_now(store, settings, actor=cli_actor().name)
    if args.format == "json":
        common.print_json({"recovered": report.recovered, "archived": report.archived})
        return 0
    common.print_table(
        [{"recovered": report.recovered, "archived": report.archived}], ["recovered", "archived"]
    )
    if args.ids:
        for job_id in report.recovered_ids:
            print(f"recovered {job_id}")
        for job_id in report.archived_ids:
            print(f"archived  {job_id}")
    return 0
