"""`chokaq worker`: a headless worker with its heartbeats, the rescue sweep, retention and the schedule
check, until SIGTERM.

Run several (on one host or many) to scale out: each claims its own jobs, and the rescue sweep and
retention take a database lease so one process does them per interval. On SIGTERM or SIGINT the worker
stops fetching, returns prefetched jobs to pending, waits Worker.ShutdownGracePeriod for running
handlers and writes their results; a second signal ends the grace period at once.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from chokaq_ops import errors
from chokaq_ops.cli import common

if TYPE_CHECKING:
    from chokaq_ops.engine.handlers import Registry
    from chokaq_ops.engine.hosting import Host
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.worker")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "worker",
        help="run a worker (with the rescue sweep, retention and schedules) until SIGTERM/SIGINT",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common.add_common(p)
    p.add_argument("--handlers", metavar="MODS", help="comma-separated modules holding @job handlers")
    p.add_argument("--concurrency", type=int, metavar="N", help="handler threads (Worker.Concurrency)")
    p.add_argument("--queues", metavar="Q1,Q2", help="claim only from these queues (Worker.Queues)")
    p.add_argument("--worker-id", metavar="ID", help="this worker's id (default <host>-<pid>-<random>)")
    p.add_argument("--metrics-port", type=int, metavar="PORT", help="serve Prometheus metrics on this port")
    p.add_argument("--no-rescue", action="store_true", help="do not run the rescue sweep in this process")
    p.add_argument("--no-retention", action="store_true", help="do not run retention in this process")
    p.add_argument(
        "--no-schedules", action="store_true", help="do not fire recurring schedules in this process"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from chokaq_ops.engine.handlers import load_handler_modules, registry
    from chokaq_ops.storage import Store

    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise errors.ValidationError("--metrics-port must be between 0 and 65535", field="metrics_port")
    settings = common.settings_from(
        args,
        {
            "worker.handlers": args.handlers,
            "worker.concurrency": args.concurrency,
            "worker.queues": args.queues,
            "worker.worker_id": args.worker_id,
        },
    )
    loaded = load_handler_modules(settings.worker.handlers)
    require_handlers(registry)
    store = Store.from_settings(settings)
    try:
        host = worker_host(
            settings,
            store,
            rescue=not args.no_rescue,
            retention=not args.no_retention,
            schedules=not args.no_schedules,
        )
        if args.metrics_port is not None:
            from prometheus_client import start_http_server

            start_http_server(args.metrics_port, registry=host.metrics.registry)
            log.info("metrics on http://0.0.0.0:%d/metrics", args.metrics_port)
        worker = host.worker
        assert worker is not None
        print(
            f"chokaq: worker {worker.worker_id} on {store.dialect.redacted_url()} "
            f"(concurrency {worker.concurrency}, queues {','.join(worker.queues or ()) or 'all'}, "
            f"handlers from {','.join(loaded) or 'none'}; "
            f"rescue {'off' if args.no_rescue else 'on'}, retention {'off' if args.no_retention else 'on'}, "
            f"schedules {'on' if host.schedules else 'off'})",
            flush=True,
        )
        host.run_forever()
    finally:
        store.close()
    return 0


def require_handlers(registry: Registry) -> None:
    if not len(registry):
        raise errors.ValidationError(
            "no job handlers: name the modules holding your @job functions with --handlers mod1,mod2 "
            "or Worker.Handlers (a worker without handlers would dead-letter every job it claims)",
            field="handlers",
        )


def worker_host(
    settings: Settings,
    store: Store,
    *,
    registry: Registry | None = None,
    rescue: bool = True,
    retention: bool = True,
    schedules: bool = True,
) -> Host:
    """A headless worker's Host (not started) on `store`, its schema checked first: SQLite is the
    embedded default and must work out of the box; a shared PostgreSQL database is upgraded deliberately
    (`chokaq migrate`), never by whichever worker starts first."""
    from chokaq_ops.engine.hosting import Host
    from chokaq_ops.storage.migrate import migrate, require_current

    if store.dialect.name == "sqlite":
        migrate(store)
    else:
        require_current(store)
    return Host(
        settings,
        store,
        registry=registry,
        run_rescue=rescue,
        run_retention=retention,
        run_schedules=schedules,
    )
