"""`chokaq serve`: the REST API on waitress plus the engine (worker, rescue sweep, retention, the checks of
recurring schedules) in one process.

On SQLite (the embedded default `sqlite:///./chokaq.db`) the schema is created or upgraded at start, so
`pip install chokaq && chokaq serve` works. On PostgreSQL the schema must be current (`chokaq migrate`),
because several processes share that database and an upgrade should be a deliberate step; `--migrate`
runs it at start instead. SIGTERM or SIGINT stop the server, then the engine (running handlers get
Worker.ShutdownGracePeriod to finish).

The command lives with the web API, not in chokaq_ops/cli: the library never imports the web layer. The
CLI finds it through the `chokaq.commands` entry-point group this package registers in pyproject.toml
(docs/architecture.md).
"""

from __future__ import annotations

import argparse
import logging
import signal
from dataclasses import asdict, dataclass
from typing import Any

from chokaq_ops import errors
from chokaq_ops.cli import common
from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store

log = logging.getLogger("chokaq.serve")


class _Stop(SystemExit):
    """Raised in the main thread by SIGTERM/SIGINT to leave the server loop. A SystemExit, because the
    signal can land inside a waitress channel handler, which logs and swallows ordinary exceptions (the
    server then kept running) but re-raises SystemExit and KeyboardInterrupt."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve the REST API and run a worker, the rescue sweep, retention and recurring schedules",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common.add_common(p)
    p.add_argument("--host", help="interface to listen on (default Api.Host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default Api.Port, 8080; 0 picks a free one)")
    p.add_argument("--threads", type=int, help="HTTP worker threads (default Api.Threads, 8)")
    p.add_argument("--handlers", help="comma-separated modules holding @job handlers (Worker.Handlers)")
    p.add_argument(
        "--concurrency", type=int, help="handler threads of the hosted worker (Worker.Concurrency)"
    )
    p.add_argument("--no-worker", action="store_true", help="do not run a worker in this process")
    p.add_argument("--no-rescue", action="store_true", help="do not run the rescue sweep in this process")
    p.add_argument("--no-retention", action="store_true", help="do not run retention in this process")
    p.add_argument("--no-alerts", action="store_true", help="do not evaluate alert rules in this process")
    p.add_argument(
        "--no-schedules", action="store_true", help="do not fire recurring schedules in this process"
    )
    p.add_argument("--migrate", action="store_true", help="create or upgrade the schema first (PostgreSQL)")
    p.set_defaults(handler=run)


def settings_for(args: argparse.Namespace) -> Settings:
    settings = common.settings_from(
        args,
        {
            "api.host": args.host,
            "api.port": args.port,
            "api.threads": args.threads,
            "worker.handlers": args.handlers,
            "worker.concurrency": args.concurrency,
        },
    )
    return fit_streams(settings)


def fit_streams(settings: Settings) -> Settings:
    """Each open event stream holds a server thread: always leave threads for ordinary requests."""
    streams = max(1, min(settings.api.sse_max_streams, settings.api.threads - 2))
    if streams != settings.api.sse_max_streams:
        settings = settings.with_overrides({"api.sse_max_streams": streams})
    return settings


@dataclass(frozen=True)
class Roles:
    """What the engine of a serving process runs besides the API."""

    worker: bool = True
    rescue: bool = True
    retention: bool = True
    schedules: bool = True
    alerts: bool = True

    def names(self, settings: Settings) -> list[str]:
        on = {
            **asdict(self),
            "schedules": self.schedules and settings.schedules.enabled,
            "alerts": self.alerts and settings.alerts.enabled,
        }
        return [name for name, running in on.items() if running]


def roles_of(args: argparse.Namespace) -> Roles:
    return Roles(
        worker=not args.no_worker,
        rescue=not args.no_rescue,
        retention=not args.no_retention,
        schedules=not args.no_schedules,
        alerts=not args.no_alerts,
    )


def run(args: argparse.Namespace) -> int:
    return serve(settings_for(args), roles_of(args), migrate=args.migrate)


def serve(settings: Settings, roles: Roles, *, migrate: bool = False, registry: Any = None) -> int:
    """The API (and The Deck) on waitress with the engine's `roles` until SIGTERM/SIGINT. `registry`: the
    handlers the worker runs (default: those the Worker.Handlers modules register)."""
    from chokaq_api import create_app

    api_store = Store.from_settings(settings)
    host = None
    try:
        common.ensure_schema(api_store, migrate_requested=migrate)
        host = build_engine(settings, roles, registry)
        app = create_app(settings, store=api_store, host=host)
        server = listen(app, settings)  # before the engine starts: a taken port starts no worker
        where = f"http://{server.effective_host}:{server.effective_port}"
        parts = ", ".join(roles.names(settings)) or "no engine"
        # The first line on stdout says where it serves (scripts read it), before any log line of the engine.
        print(f"chokaq: serving {where}/api/v1 on {api_store.dialect.redacted_url()} ({parts})", flush=True)
        if settings.deck.enabled:
            print(f"chokaq: The Deck (web console) at {where}{settings.deck.route_prefix}/", flush=True)
        if host is not None:
            host.start()
        _install_signals()
        try:
            server.run()
        except (_Stop, KeyboardInterrupt):
            log.info("stopping")
        finally:
            server.close()
            server.task_dispatcher.shutdown(timeout=5)
    finally:
        if host is not None:
            stop_engine(host)
        api_store.close()
    return 0


def listen(app: Any, settings: Settings) -> Any:
    """A waitress server bound to Api.Host:Api.Port with the Api limits (not yet serving)."""
    from chokaq_api.server import create

    try:
        return create(app, settings)
    except OSError as exc:
        raise errors.ConfigError(
            f"cannot listen on {settings.api.host}:{settings.api.port}: {exc.strerror or exc}",
            field="Api.Port",
        ) from exc


def build_engine(settings: Settings, roles: Roles, registry: Any = None) -> Any:
    """The engine Host (not started) on its own store, so a busy worker cannot starve the API's pool."""
    if not roles.names(settings):
        return None
    from chokaq_ops.engine.handlers import load_handler_modules
    from chokaq_ops.engine.hosting import Host

    if roles.worker and registry is None:
        load_handler_modules(settings.worker.handlers)
    store = Store.from_settings(settings)
    try:
        return Host(
            settings,
            store,
            registry=registry,
            run_worker=roles.worker,
            run_rescue=roles.rescue,
            run_retention=roles.retention,
            run_schedules=roles.schedules,
            run_alerts=roles.alerts,
        )
    except BaseException:
        store.close()
        raise


def stop_engine(host: Any) -> None:
    """The worker first (running handlers get Worker.ShutdownGracePeriod), then the scheduler."""
    try:
        host.shutdown()
    finally:
        host.store.close()


def _install_signals() -> None:
    def stop(signum: int, frame: Any) -> None:
        raise _Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
