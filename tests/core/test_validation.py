"""Envelope limits (chokaq_ops/validation.py) that no database is needed to check."""

from __future__ import annotations

import pytest

from chokaq_ops import errors, validation


def test_the_payload_limit_counts_bytes_not_characters():
    """ASCII text is counted by its length, other text by its UTF-8 encoding: "é" is two bytes."""
    assert validation.payload("x" * 10, max_bytes=10, require_json=False) == "x" * 10
    with pytest.raises(errors.ValidationError, match="11 bytes; the limit is 10") as over:
        validation.payload("x" * 11, max_bytes=10, require_json=False)
    assert over.value.field == "payload"
    assert validation.payload("é" * 5, max_bytes=10, require_json=False) == "é" * 5
    with pytest.raises(errors.ValidationError, match="12 bytes; the limit is 10"):
        validation.payload("é" * 6, max_bytes=10, require_json=False)  # six characters, twelve bytes
    with pytest.raises(errors.ValidationError, match="11 bytes"):
        validation.payload("x" * 7 + "😀", max_bytes=10, require_json=False)  # a 4-byte character last
