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


def new_ids(n: int) -> list[str]:
    """`n` ids as `new_id` makes them one by one: after the first, each is the one before plus one (the
    ULID layout's rule within a millisecond), so a batch takes one lock, one read of the clock and of
    urandom, and writes each id's last four symbol pairs only (0.5 us an id against 2.1)."""
    global _last
    if n <= 1:  # one id: new_id's own encoding is the cheaper (2.2 us against 3.0 here)
        return [new_id()] if n == 1 else []
    with _lock:
        ms = time.time_ns() // 1_000_000
        rand = int.from_bytes(os.urandom(10), "big")
        if ms <= _last[0]:
            ms, rand = _last[0], (_last[1] + 1) & ((1 << 80) - 1)
        if rand + n > 1 << 80:  # the random part would wrap: take the next millisecond's start instead
            ms, rand = ms + 1, rand & ((1 << 40) - 1)
        _last = (ms, rand + n - 1)
    first = (ms << 80) | rand
    p = _PAIRS
    out = []
    head_of, head = -1, ""
    for v in range(first, first + n):
        if v >> 40 != head_of:  # the top 90 bits change once in 2**40 ids
            head_of, head = v >> 40, _symbols(v)[:18]
        out.append(head + p[(v >> 30) & 1023] + p[(v >> 20) & 1023] + p[(v >> 10) & 1023] + p[v & 1023])
    return out


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
