"""Job ids: ULID layout in Crockford base32, sortable by creation time."""

from __future__ import annotations

import base64
import random

from chokaq_ops import ids

# RFC 4648 base32 to Crockford's alphabet: the reference encoding (what ids.py used before its table).
_TO_CROCKFORD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", ids._ALPHABET.encode())


def _reference(value: int) -> str:
    return base64.b32encode((value << 6).to_bytes(17, "big"))[:26].translate(_TO_CROCKFORD).decode()


def test_symbols_match_the_base32_reference_at_every_bit() -> None:
    rng = random.Random(7)
    values = [0, 1, (1 << 128) - 1, 1 << 127, 1 << 80, (1 << 48) - 1 << 80]
    values += [1 << b for b in range(128)] + [rng.getrandbits(128) for _ in range(5000)]
    for v in values:
        assert ids._symbols(v) == _reference(v), v


def test_ids_sort_by_value_and_creation() -> None:
    rng = random.Random(11)
    values = sorted(rng.getrandbits(128) for _ in range(2000))
    assert sorted(ids._symbols(v) for v in values) == [ids._symbols(v) for v in values]
    made = [ids.new_id() for _ in range(2000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(len(i) == 26 and set(i) <= set(ids._ALPHABET) for i in made)
