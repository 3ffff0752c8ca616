"""Handlers for the end-to-end tests' `chokaq serve` processes (imported with --handlers)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from chokaq_ops import job

OUT = Path(os.environ.get("CHOKAQ_TEST_DIR", "."))


@job("email.send.v1")
def send_email(payload, ctx):
    with open(OUT / "sent.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": ctx.job_id, "payload": payload}) + "\n")


@job("slow.v1")
def slow(payload, ctx):
    (OUT / f"started-{ctx.job_id}").write_text(str(os.getpid()))
    deadline = time.monotonic() + float(payload.get("seconds", 60))
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(0.05)
