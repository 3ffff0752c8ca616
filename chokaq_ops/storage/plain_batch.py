"""enqueue_many's commonest batch, built as the text of its statement's parameter.

A batch whose jobs give nothing but a type, a queue, a payload and a priority (no id, key, delay, time,
tags, author or trace context) goes to `enqueue_fresh` as a JSON array of `{"id", "queue", "type",
"priority", "payload"}` objects, null payloads left out. Built as item dicts and then encoded, that array
cost the producer 2.2 us a job of the 12.6 a 1,000-job enqueue took end to end; written directly as text,
each distinct (queue, type, priority) validated and encoded once and each payload escaped by the C
encoder, 0.96 us (docs/benchmarks.md "enqueue_many as text"). The text holds the objects the general
items would encode to (`items()` reads them back for the lost-reply paths, which need dicts), and a job
is refused with the same errors as on the general path. `counts` goes with it: the statement adds the
counters from it instead of returning its rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _quoted
from typing import Any, cast

from chokaq_ops import ids, tracing, validation
from chokaq_ops.models import DEFAULT_PRIORITY, NewJob


@dataclass(frozen=True)
class PlainBatch:
    text: str  # enqueue_fresh's `items` parameter
    ids: list[str]  # the jobs' generated ids, in the jobs' order
    counts: dict[str, int]  # validated queue name -> how many of the jobs go to it

    def items(self) -> list[dict[str, Any]]:
        """The items as dicts, in order (without ordinals, null payloads left out)."""
        items: list[dict[str, Any]] = json.loads(self.text)
        return items


_NOTHING = object()  # no job's field is this


def gives_more(job: NewJob) -> bool:
    """Whether a job gives more than a type, a queue, a payload and a priority."""
    return (
        job.id is not None
        or job.idempotency_key is not None
        or job.delay_seconds is not None
        or job.scheduled_at is not None
        or job.tags is not None
        or job.created_by is not None
        or job.trace_context is not None
    )


def build(jobs: Sequence[NewJob], max_payload_bytes: int) -> PlainBatch | None:
    """The batch as enqueue_fresh's text, or None when a job gives more than the four plain fields or a
    trace context applies (the general items carry those). Raises ValidationError as `_enqueue_item`."""
    # A batch's jobs are mostly alike: one that gives more at the head ends it before any id is drawn.
    if not jobs or gives_more(jobs[0]) or (tracing.ENABLED and tracing.current_context() is not None):
        return None
    # Per distinct (queue, type, priority): the item's text between the id and the payload, the queue's
    # validated name, and how many of the batch's jobs it heads.
    heads: dict[tuple[Any, Any, Any], list[Any]] = {}
    parts = []
    # Drawn before the jobs are known to be plain (one lock and one urandom read for all; a batch that is
    # not plain leaves them unused): each item's text is then written in one go.
    new = ids.new_ids(len(jobs))
    # The previous job's (queue, type, priority) objects and their entry: a batch built in a loop passes
    # the same objects job after job, found by identity without building a key (every tuple built per job
    # is one more object for the collector, whose passes over a batch's objects cost 0.7 us a job).
    last: tuple[Any, Any, Any] = (_NOTHING, _NOTHING, _NOTHING)
    entry: list[Any] = []
    for job, job_id in zip(jobs, new, strict=True):
        if gives_more(job):  # a call per job: inlined, it saved 0.03 us of ~11
            return None
        queue, type_, priority = job.queue, job.type, job.priority
        if queue is not last[0] or type_ is not last[1] or priority is not last[2]:
            last = (queue, type_, priority)
            entry = _entry(heads, last)
        entry[2] += 1
        head = entry[0]
        payload = job.payload
        if payload is None:
            parts.append(f'{{"id":"{job_id}{head}}}')
            continue
        # validation.payload's checks, inline for the usual case (an ASCII text within the limit); the call
        # per job cost 0.17 us of ~11. Anything else goes through it.
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


def _entry(heads: dict[tuple[Any, Any, Any], list[Any]], key: tuple[Any, Any, Any]) -> list[Any]:
    """The entry [text between id and payload, validated queue name, jobs counted] of a job's (queue, type,
    priority), validated the first time. Only values that hash and compare as themselves are looked up
    raw; another kind (a bool priority equals 1) gets the validation's own error, and one that passes it
    (a str subclass) is keyed by its validated values."""
    memo = type(key[0]) is str and type(key[1]) is str and (key[2] is None or type(key[2]) is int)
    entry = heads.get(key) if memo else None
    if entry is None:
        checked = validation.priority(key[2])
        name = validation.queue(key[0])
        kind = cast(str, validation.text(key[1], "type", max_len=validation.MAX_TYPE))
        if not memo:
            key = (name, kind, checked)
        entry = heads.get(key)
        if entry is None:
            text = (
                f'","queue":{_quoted(name)},"type":{_quoted(kind)},'
                f'"priority":{DEFAULT_PRIORITY if checked is None else checked}'
            )
            entry = heads[key] = [text, name, 0]
    return entry
