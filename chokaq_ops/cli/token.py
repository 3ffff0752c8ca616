"""`chokaq token create|list|revoke`: API tokens (stored hashed; the plaintext is shown once)."""

from __future__ import annotations

import argparse
import getpass
import os

from chokaq_ops.cli import common
from chokaq_ops.models import Actor
from chokaq_ops.storage.tokens import ROLES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("token", help="create, list and revoke API tokens")
    tokens = p.add_subparsers(dest="token_command", metavar="COMMAND", parser_class=type(p))
    tokens.required = True

    create = tokens.add_parser(
        "create", help="create a token and print it (only once) on stdout", description=__doc__
    )
    common.add_common(create)
    create.add_argument("name", help="the token's name; audit rows name it as the actor")
    create.add_argument("--role", required=True, choices=ROLES, help="reader, operator or admin")
    create.set_defaults(handler=run_create)

    ls = tokens.add_parser("list", help="list tokens (names, roles, last use; never the secrets)")
    common.add_common(ls)
    common.add_format(ls)
    ls.set_defaults(handler=run_list)

    revoke = tokens.add_parser("revoke", help="revoke a token at once")
    common.add_common(revoke)
    revoke.add_argument("name")
    revoke.set_defaults(handler=run_revoke)


def cli_actor() -> Actor:
    """Who ran the command, for the audit log: the OS user (tokens are made before any token exists)."""
    try:
        user = getpass.getuser()
    except Exception:
        user = os.environ.get("USER") or "unknown"
    return Actor(f"cli:{user}"[:100])


def run_create(args: argparse.Namespace) -> int:
    with common.open_store(args, create=True) as store:
        # The first token is often made before the first `chokaq serve`: same schema rule as serve.
        common.ensure_schema(store, migrate_requested=False)
        token = store.create_token(args.name, args.role, actor=cli_actor())
    print(token)
    return 0


def run_list(args: argparse.Namespace) -> int:
    with common.open_store(args) as store:
        rows = store.list_tokens()
    for row in rows:
        row["status"] = "revoked" if row.get("revoked_at") else "active"
    common.emit(
        rows,
        ["name", "role", "status", "created_at", "created_by", "last_used_at", "revoked_at"],
        args.format,
        noun="tokens",
    )
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    with common.open_store(args) as store:
        if not store.revoke_token(args.name, actor=cli_actor()):
            raise common_not_found(args.name)
    print(f"revoked {args.name}")
    return 0


def common_not_found(name: str) -> Exception:
    from chokaq_ops import errors

    return errors.JobNotFound(f"no active token named {name!r}")
