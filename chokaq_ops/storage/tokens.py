"""API tokens (docs/security.md): created and revoked by an admin, audited; only a hash is stored."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime
from typing import Any

from chokaq_ops import errors, validation
from chokaq_ops.models import Actor
from chokaq_ops.storage.audit import audit_in, checked_actor
from chokaq_ops.storage.database import Database
from chokaq_ops.storage.inputs import required_text

ROLES = ("reader", "operator", "admin")


class Tokens:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create_token(self, name: str, role: str, *, actor: Actor) -> str:
        """Create an API token and return its plaintext (shown once; only a hash is stored)."""
        actor = checked_actor(actor)
        name = required_text(name, "name", max_len=validation.MAX_ACTOR)
        if role not in ROLES:
            raise errors.ValidationError(f"role must be one of {', '.join(ROLES)}", field="role")
        token = "chq_" + secrets.token_urlsafe(32)

        def create(tx: Any) -> None:
            tx.run("create_token", name=name, role=role, token_hash=hash_token(token), actor=actor.name)
            audit_in(tx, actor, "token_create", details={"name": name, "role": role})

        try:
            self.db.transaction(create)
        except errors.Conflict:
            raise errors.Conflict(f"a token named {name!r} exists already", field="name") from None
        return token

    def verify_token(self, token: str) -> dict[str, Any] | None:
        """The token's {name, role} if it is valid and not revoked."""
        if not token or len(token) > 200:
            return None
        digest = hash_token(token)
        rows = self.db.run("token_by_hash", write=False, token_hash=digest)
        if not rows or not secrets.compare_digest(rows[0]["token_hash"].strip(), digest):
            return None
        last = rows[0]["last_used_at"]
        if last is None or (datetime.now(UTC) - last).total_seconds() > 60:
            self.db.run("touch_token", token_hash=digest)
        return {"name": rows[0]["name"], "role": rows[0]["role"].strip()}

    def list_tokens(self) -> list[dict[str, Any]]:
        return self.db.run("list_tokens", write=False)

    def revoke_token(self, name: str, *, actor: Actor) -> bool:
        actor = checked_actor(actor)

        def revoke(tx: Any) -> bool:
            if not tx.run("revoke_token", name=name):
                return False
            audit_in(tx, actor, "token_revoke", details={"name": name})
            return True

        return self.db.transaction(revoke)


def hash_token(token: str) -> str:
    # Tokens are 256-bit random strings, so a plain SHA-256 is enough: there is nothing to brute-force.
    return hashlib.sha256(token.encode()).hexdigest()
