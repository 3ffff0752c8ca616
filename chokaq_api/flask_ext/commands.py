"""`flask chokaq migrate|worker|serve`: the chokaq commands with the app's configuration (its CHOKAQ_*
keys), and handlers that run inside the app's application context (current_app, g, the app's database
helpers), as Flask-RQ2 and Celery's Flask pattern do.

    flask --app myapp chokaq migrate          # create or upgrade the schema
    flask --app myapp chokaq worker           # a worker (+ rescue sweep, retention, schedule checks)
    flask --app myapp chokaq serve --port 8080   # the operator API, The Deck and an engine
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import AppGroup

from chokaq_ops import errors
from chokaq_ops.engine import handlers
from chokaq_ops.engine.handlers import Registry, load_handler_modules
from chokaq_ops.settings import Settings


def in_app_context(app: Flask, registry: Registry) -> Registry:
    """A copy of `registry` whose handlers each run inside an application context of `app` (pushed for
    the call, popped after, so `g` is fresh per job)."""
    wrapped = Registry()
    for handler in registry:
        fn = handler.fn

        @functools.wraps(fn)
        def run(payload: Any, ctx: Any, fn: Callable[..., Any] = fn) -> Any:
            with app.app_context():
                return fn(payload, ctx)

        wrapped.add(replace(handler, fn=run))
    return wrapped


def _chokaq_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """chokaq's errors as click's: bad input or configuration exits 2 with the message, others 1."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (errors.ValidationError, errors.ConfigError, errors.UsageError) as exc:
            raise click.UsageError(str(exc)) from exc
        except errors.ChokaqError as exc:
            raise click.ClickException(str(exc)) from exc

    return run


def _settings(overrides: dict[str, Any]) -> Settings:
    return current_app.extensions["chokaq"].settings.with_overrides(overrides)


def _registry(settings: Settings) -> Registry:
    load_handler_modules(settings.worker.handlers)
    return in_app_context(current_app._get_current_object(), handlers.registry)  # type: ignore[attr-defined]


chokaq_commands = AppGroup("chokaq", help="chokaq with this app's configuration: migrate, worker, serve.")


@chokaq_commands.command("migrate")
@_chokaq_errors
def migrate_command() -> None:
    """Create or upgrade the chokaq schema in the app's database."""
    from chokaq_ops.storage.migrate import migrate

    result = migrate(current_app.extensions["chokaq"].store)
    applied = f" (applied {', '.join(map(str, result.applied))})" if result.applied else " (already current)"
    click.echo(f"chokaq: schema at version {result.version}{applied}")


_ENGINE_OPTIONS = (
    click.option("--handlers", help="comma-separated modules holding @job handlers (Worker.Handlers)"),
    click.option("--concurrency", type=int, help="handler threads (Worker.Concurrency)"),
    click.option("--no-rescue", is_flag=True, help="do not run the rescue sweep in this process"),
    click.option("--no-retention", is_flag=True, help="do not run retention in this process"),
    click.option("--no-schedules", is_flag=True, help="do not fire recurring schedules in this process"),
)


def engine_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_ENGINE_OPTIONS):
        command = option(command)
    return command


@chokaq_commands.command("worker")
@engine_options
@click.option("--queues", help="claim only from these queues (Worker.Queues)")
@click.option("--worker-id", help="this worker's id (default <host>-<pid>-<random>)")
@_chokaq_errors
def worker_command(
    handlers: str | None,
    concurrency: int | None,
    no_rescue: bool,
    no_retention: bool,
    no_schedules: bool,
    queues: str | None,
    worker_id: str | None,
) -> None:
    """Run a worker until SIGTERM/SIGINT, its handlers in the app's context."""
    from chokaq_ops.cli.worker import require_handlers, worker_host
    from chokaq_ops.storage import Store

    settings = _settings(
        {
            "worker.handlers": handlers,
            "worker.concurrency": concurrency,
            "worker.queues": queues,
            "worker.worker_id": worker_id,
        }
    )
    registry = _registry(settings)
    require_handlers(registry)
    store = Store.from_settings(settings)  # its own pool: a busy worker does not starve the app's
    try:
        host = worker_host(
            settings,
            store,
            registry=registry,
            rescue=not no_rescue,
            retention=not no_retention,
            schedules=not no_schedules,
        )
        assert host.worker is not None
        click.echo(
            f"chokaq: worker {host.worker.worker_id} of {current_app.name} on {store.dialect.redacted_url()} "
            f"(handlers {', '.join(registry.types())}; schedules {'on' if host.schedules else 'off'})"
        )
        host.run_forever()
    finally:
        store.close()


@chokaq_commands.command("serve")
@engine_options
@click.option("--host", help="interface to listen on (Api.Host, default 127.0.0.1)")
@click.option("--port", type=int, help="port (Api.Port, default 8080; 0 picks a free one)")
@click.option("--threads", type=int, help="HTTP threads (Api.Threads)")
@click.option("--no-worker", is_flag=True, help="do not run a worker in this process")
@click.option(
    "--migrate", "migrate_first", is_flag=True, help="create or upgrade the schema first (PostgreSQL)"
)
@_chokaq_errors
def serve_command(
    handlers: str | None,
    concurrency: int | None,
    no_rescue: bool,
    no_retention: bool,
    no_schedules: bool,
    host: str | None,
    port: int | None,
    threads: int | None,
    no_worker: bool,
    migrate_first: bool,
) -> None:
    """Serve chokaq's operator API and The Deck, with a worker, the rescue sweep, retention and the
    schedule checks: `chokaq serve` with the app's configuration, its handlers in the app's context."""
    from chokaq_api.serve import Roles, fit_streams, serve

    settings = _settings(
        {
            "api.host": host,
            "api.port": port,
            "api.threads": threads,
            "worker.handlers": handlers,
            "worker.concurrency": concurrency,
        }
    )
    settings = fit_streams(settings)
    registry = _registry(settings) if not no_worker else None
    roles = Roles(
        worker=not no_worker, rescue=not no_rescue, retention=not no_retention, schedules=not no_schedules
    )
    serve(settings, roles, migrate=migrate_first, registry=registry)
