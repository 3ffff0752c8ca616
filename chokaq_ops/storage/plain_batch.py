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
    queues: frozenset[str]  # the validated queue names the batch uses

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
    # Per distinct (queue, type, priority): the item's text between the id and the payload.
    heads: dict[tuple[Any, Any, Any], str] = {}
    queues: set[str] = set()
    bodies = []
    extras = _EXTRAS
    for job in jobs:
        if extras(job) != _UNSET:  # gives_more, without a call per job
            return None
        queue, type_, priority = job.queue, job.type, job.priority
        # Only values that hash and compare as themselves are looked up; another kind (a bool priority
        # equals 1) gets the validation's own error.
        memo = type(queue) is str and type(type_) is str and (priority is None or type(priority) is int)
        head = heads.get((queue, type_, priority)) if memo else None
        if head is None:
            checked = validation.priority(priority)
            name = validation.queue(queue)
            kind = cast(str, validation.text(type_, "type", max_len=validation.MAX_TYPE))
            head = (
                f'","queue":{_quoted(name)},"type":{_quoted(kind)},'
                f'"priority":{DEFAULT_PRIORITY if checked is None else checked}'
            )
            queues.add(name)
            if memo:
                heads[(queue, type_, priority)] = head
        payload = job.payload
        if payload is None:
            bodies.append(head + "}")
            continue
        # validation.payload's checks, inline for the usual case: an ASCII text within the limit.
        if (
            type(payload) is not str
            or not payload.isascii()
            or len(payload) > max_payload_bytes
            or "\x00" in payload
        ):
            payload = cast(str, validation.payload(payload, max_bytes=max_payload_bytes, require_json=False))
        bodies.append(f'{head},"payload":{_quoted(payload)}}}')
    # Drawn once the batch is known to be plain: one lock and one urandom read for all its ids.
    new = ids.new_ids(len(bodies))
    text = "[" + ",".join([f'{{"id":"{i}{body}' for i, body in zip(new, bodies, strict=True)]) + "]"
    return PlainBatch(text, new, frozenset(queues))
