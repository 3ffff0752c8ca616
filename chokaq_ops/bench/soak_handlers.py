"""The handler `chokaq bench soak` runs its jobs with (the server it starts imports this module)."""

from __future__ import annotations

from typing import Any

from chokaq_ops.bench.soak_load import TYPE
from chokaq_ops.engine.handlers import job


@job(TYPE)
def noop(payload: Any, ctx: Any) -> None:
    return None
