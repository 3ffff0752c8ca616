"""argparse value types shared by the CLI (chokaq_ops/cli) and the benches' own parsers (chokaq_ops/bench),
which may not import the CLI (it imports them)."""

from __future__ import annotations

import argparse


def positive_int(value: str) -> int:
    """A whole number of at least 1 (underscores allowed, as in 1_000_000)."""
    try:
        n = int(value.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n
