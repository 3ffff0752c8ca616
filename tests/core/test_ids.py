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


def _value(job_id: str) -> int:
    return sum(ids._ALPHABET.index(c) << (5 * (25 - i)) for i, c in enumerate(job_id))


def test_a_batch_of_ids_counts_up_from_a_fresh_id_and_encodes_like_one_by_one() -> None:
    before = ids.new_id()
    batch = ids.new_ids(3000)
    after = ids.new_id()
    values = [_value(i) for i in batch]
    assert values == list(range(values[0], values[0] + 3000))  # consecutive, as within one millisecond
    assert batch == [_reference(v) for v in values]
    assert before < batch[0] and batch[-1] < after  # monotonic with the ids made one by one
    assert ids.new_ids(0) == [] and len(set(ids.new_ids(2) + ids.new_ids(2))) == 4
    one = ids.new_ids(1)
    assert len(one) == 1 and after < one[0] and one[0] == _reference(_value(one[0]))


def test_a_batch_whose_low_symbols_carry_rewrites_the_high_ones(monkeypatch) -> None:
    # The last 40 bits about to overflow: the ids past the carry take a new head, as _symbols writes it.
    monkeypatch.setattr(ids, "_last", (ids._last[0] + 10**6, (1 << 40) - 3))
    batch = ids.new_ids(6)
    values = [_value(i) for i in batch]
    assert values == list(range(values[0], values[0] + 6))
    assert batch == [_reference(v) for v in values] and batch == sorted(batch)
    assert {v >> 40 for v in values} == {values[0] >> 40, (values[0] >> 40) + 1}
