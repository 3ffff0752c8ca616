"""Sortable job ids: 48-bit millisecond time + 80 random bits, Crockford base32 (ULID layout)."""

from __future__ import annotations

import os
import socket
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Every 10-bit value as its two symbols: an id is 13 look-ups, 1.8 us where base64.b32encode (pure Python)
# took 4.6 us, a fifth of a batch enqueue's CPU per job.
_PAIRS = tuple(a + b for a in _ALPHABET for b in _ALPHABET)
_lock = threading.Lock()
_last = (0, 0)


def new_id() -> str:
    """A 26-character id that sorts by creation time, monotonic within one process."""
    global _last
    with _lock:
        ms = time.time_ns() // 1_000_000
        rand = int.from_bytes(os.urandom(10), "big")
        if ms <= _last[0]:
            # Same millisecond (or a clock step back): keep order by incrementing the random part.
            ms, rand = _last[0], (_last[1] + 1) & ((1 << 80) - 1)
        _last = (ms, rand)
    return _symbols((ms << 80) | rand)


def _symbols(v: int) -> str:
    """The 26 symbols of a 128-bit value (two leading zero bits make 130), most significant first."""
    p = _PAIRS
    return (
        p[v >> 120] + p[(v >> 110) & 1023] + p[(v >> 100) & 1023] + p[(v >> 90) & 1023]
        + p[(v >> 80) & 1023] + p[(v >> 70) & 1023] + p[(v >> 60) & 1023] + p[(v >> 50) & 1023]
        + p[(v >> 40) & 1023] + p[(v >> 30) & 1023] + p[(v >> 20) & 1023] + p[(v >> 10) & 1023]
        + p[v & 1023]
    )  # fmt: skip


def new_worker_id() -> str:
    """`<host>-<pid>-<4 random hex>`: readable in the DLQ, unique across restarts."""
    return f"{socket.gethostname()[:60]}-{os.getpid()}-{os.urandom(2).hex()}"
