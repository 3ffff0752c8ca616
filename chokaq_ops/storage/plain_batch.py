"""enqueue_many's commonest batch, built as the text of its statement's parameter.

A batch whose jobs give nothing but a type, a queue, a payload and a priority (no id, key, delay, time,
tags, author or trace context) goes to `enqueue_fresh` as a JSON array of `{"id", "queue", "type",
"priority", "payload"}` objects, null payloads left out. Built as item dicts and then encoded, that array
cost the producer 2.2 us a job of the 12.6 a 1,000-job enqueue takes end to end; written directly as text,
each distinct (queue, type, priority) validated and encoded once and each payload escaped by the C
encoder, 0.9 us (docs/benchmarks.md "enqueue_many as text"). The text is what the general items would
encode to (`items()` reads it back for the lost-reply paths, which need dicts), and a job is refused with
the same errors as on the general path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _quoted
from operator import attrgetter
from typing import Any, cast

from chokaq_ops import ids, tracing, validation
from chokaq_ops.models import NewJob

DEFAULT_PRIORITY = 10


@dataclass(frozen=True)
class PlainBatch:
    text: str  # enqueue_fresh's `items` parameter
    ids: list[str]  # the jobs' generated ids, in the jobs' order
    counts: dict[str, int]  # validated queue name -> how many of the jobs go to it

    def items(self) -> list[dict[str, Any]]:
        """The items as dicts, in order (without ordinals, null payloads left out)."""
        items: list[dict[str, Any]] = json.loads(self.text)
        return items


# The fields a plain job leaves unset, read in one C call.
_EXTRAS = attrgetter(
    "id", "idempotency_key", "delay_seconds", "scheduled_at", "tags", "created_by", "trace_context"
)
_UNSET = (None,) * 7


def gives_more(job: NewJob) -> bool:
    """Whether a job gives more than a type, a queue, a payload and a priority."""
    return _EXTRAS(job) != _UNSET


def build(jobs: Sequence[NewJob], max_payload_bytes: int) -> PlainBatch | None:
    """The batch as enqueue_fresh's text, or None when a job gives more than the four plain fields or a
    trace context applies (the general items carry those). Raises ValidationError as `_enqueue_item`."""
    if tracing.ENABLED and tracing.current_context() is not None:
        return None
    # Per distinct (queue, type, priority): the item's text between the id and the payload, the queue's
    # validated name, and how many of the batch's jobs it heads.
    heads: dict[tuple[Any, Any, Any], list[Any]] = {}
    parts = []
    extras = _EXTRAS
    # Drawn before the jobs are known to be plain (one lock and one urandom read for all; a batch that is
    # not plain leaves them unused): each item's text is then written in one go.
    new = ids.new_ids(len(jobs))
    for job, job_id in zip(jobs, new, strict=True):
        if extras(job) != _UNSET:  # gives_more, without a call per job
            return None
        key: tuple[Any, Any, Any] = (job.queue, job.type, job.priority)
        # Only values that hash and compare as themselves are looked up; another kind (a bool priority
        # equals 1) gets the validation's own error.
        memo = type(key[0]) is str and type(key[1]) is str and (key[2] is None or type(key[2]) is int)
        entry = heads.get(key) if memo else None
        if entry is None:
            checked = validation.priority(key[2])
            name = validation.queue(key[0])
            kind = cast(str, validation.text(key[1], "type", max_len=validation.MAX_TYPE))
            if not memo:  # (a str subclass, say) keyed by its validated values, which do
                key = (name, kind, checked)
            entry = heads.get(key)
            if entry is None:
                text = (
                    f'","queue":{_quoted(name)},"type":{_quoted(kind)},'
                    f'"priority":{DEFAULT_PRIORITY if checked is None else checked}'
                )
                entry = heads[key] = [text, name, 0]
        entry[2] += 1
        head = entry[0]
        payload = job.payload
        if payload is None:
            parts.append(f'{{"id":"{job_id}{head}}}')
            continue
        # validation.payload's checks, inline for the usual case: an ASCII text within the limit.
        if (
            type(payload) is not str
            or not payload.isascii()
            or len(payload) > max_payload_bytes
            or "\x00" in payload
        ):
            payload = cast(str, validation.payload(payload, max_bytes=max_payload_bytes, require_json=False))
        parts.append(f'{{"id":"{job_id}{head},"payload":{_quoted(payload)}}}')
    counts: dict[str, int] = {}
    for _, name, n in heads.values():
        counts[name] = counts.get(name, 0) + n
    return PlainBatch("[" + ",".join(parts) + "]", new, counts)
