"""Where a command works: the database (`--db`, CHOKAQ_DB, the config file) or a running API (`--api URL`,
CHOKAQ_API_URL) with a token from CHOKAQ_API_TOKEN or a file (`--token-file`, CHOKAQ_API_TOKEN_FILE),
never from the command line (it would show in `ps` and shell history).

The commands a cron host runs without database credentials take both (`dlq`, `plans`, `audit`, `cancel`,
`stats`, `schedules`, `alerts`): the same output and exit codes either way. Which one: `--db` or `--api`
when given (both is a usage error; `--db http://...` means `--api`), else CHOKAQ_API_URL when set, else
the database.
"""

from __future__ import annotations

import argparse
import getpass
import os
from pathlib import Path
from typing import TYPE_CHECKING

from chokaq_ops import errors
from chokaq_ops.cli import common

if TYPE_CHECKING:
    from chokaq_ops.client.db import DbClient
    from chokaq_ops.client.http import HttpClient

API_URL_ENV = "CHOKAQ_API_URL"
API_TOKEN_ENV = "CHOKAQ_API_TOKEN"
API_TOKEN_FILE_ENV = "CHOKAQ_API_TOKEN_FILE"


def add_target(parser: argparse.ArgumentParser) -> None:
    """--db/--config (common) and --api/--token-file."""
    common.add_common(parser)
    parser.add_argument(
        "--api",
        metavar="URL",
        help=f"a running chokaq API instead of the database (default: {API_URL_ENV} when set); the token "
        f"comes from {API_TOKEN_ENV} or --token-file",
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"a file holding the API token (default: {API_TOKEN_FILE_ENV}; else {API_TOKEN_ENV})",
    )


def api_url(args: argparse.Namespace) -> str | None:
    """The API this invocation targets, or None for the database."""
    db = getattr(args, "db", None)
    api = getattr(args, "api", None)
    if db and db.lower().startswith(("http://", "https://")):
        if api:
            raise errors.UsageError("give --db or --api, not both")
        return str(db)
    if db and api:
        raise errors.UsageError("give --db or --api, not both")
    if api:
        return str(api)
    if db:
        return None
    return os.environ.get(API_URL_ENV) or None


def api_token(args: argparse.Namespace) -> str:
    """The token: --token-file, else CHOKAQ_API_TOKEN_FILE, else CHOKAQ_API_TOKEN."""
    path = getattr(args, "token_file", None) or os.environ.get(API_TOKEN_FILE_ENV)
    if path:
        try:
            token = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise errors.UsageError(f"cannot read the token file {path}: {exc.strerror}") from None
        if not token:
            raise errors.UsageError(f"the token file {path} is empty")
        return token
    token = os.environ.get(API_TOKEN_ENV, "").strip()
    if not token:
        raise errors.UsageError(
            f"the API needs a token: set {API_TOKEN_ENV}, or {API_TOKEN_FILE_ENV} / --token-file to a file "
            "holding it (never on the command line)"
        )
    return token


def actor_of(args: argparse.Namespace) -> str:
    """Who a change on the database is audited as: --actor, else CHOKAQ_ACTOR, else cli:<OS user>.
    Over the API the token's name is the actor (--actor is refused there)."""
    name = getattr(args, "actor", None) or os.environ.get("CHOKAQ_ACTOR")
    if name:
        return str(name)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"cli:{user}"


def client_of(args: argparse.Namespace, *, create: bool = False) -> DbClient | HttpClient:
    """The client of this invocation: HttpClient on the API, else DbClient on a current database. With
    `create` (a command that may start a database, common.py) a SQLite file is made and migrated."""
    url = api_url(args)
    if url is not None:
        from chokaq_ops.client.http import HttpClient

        if getattr(args, "actor", None):
            raise errors.UsageError("over the API the actor is the token's name; drop --actor")
        return HttpClient(url, api_token(args), retries=1, timeout=30.0)
    from chokaq_ops.client.db import DbClient
    from chokaq_ops.storage.migrate import require_current

    settings = common.settings_from(args)
    client = DbClient(
        common.open_store(args, settings, create=create),
        actor=actor_of(args),
        settings=settings,
        close_store=True,
    )
    try:
        if create:
            common.ensure_schema(client.store, migrate_requested=False)
        else:
            require_current(client.store)
    except BaseException:
        client.close()
        raise
    return client


def on_api(args: argparse.Namespace) -> bool:
    return api_url(args) is not None
