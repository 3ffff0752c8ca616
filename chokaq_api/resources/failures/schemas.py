"""The failure history: every failed attempt, kept after a resurrect and a success."""

from __future__ import annotations

import marshmallow as ma

from chokaq_api import fields
from chokaq_api.extensions import Schema
from chokaq_ops import validation
from chokaq_ops.filters import TIME_HELP
from chokaq_ops.storage.failure_ops import MAX_FAILURE_PAGE

# seq is a bigint: a larger value names no row, and SQLite cannot even bind it (a 500 before this bound).
MAX_SEQ = 2**63 - 1
_LIST = "Comma-separated; a value starting with ! excludes it (e.g. Fatal,Timeout or !Zombie)."


def _text(description: str) -> ma.fields.String:
    return ma.fields.String(validate=ma.validate.Length(1, 20_000), metadata={"description": description})


class FailureQuery(Schema):
    """The filter grammar of docs/failures.md; parsed by chokaq_ops.filters, as in Python and the CLI."""

    ids = _text("Job ids, comma-separated.")
    queue = _text(_LIST)
    type = _text(_LIST)
    reason = _text("Failure reasons by name or number. " + _LIST)
    fingerprint = _text("Fingerprints, comma-separated.")
    outcome = ma.fields.String(validate=ma.validate.OneOf(["retry", "dead"]))
    failed_from = _text(f"Inclusive start: {TIME_HELP}.")
    failed_to = _text(f"Exclusive end: {TIME_HELP}.")
    after_seq = ma.fields.Integer(
        validate=ma.validate.Range(0, MAX_SEQ),
        metadata={"description": "Rows after this seq (the next page)."},
    )
    limit = ma.fields.Integer(load_default=1000, validate=ma.validate.Range(1, MAX_FAILURE_PAGE))


class JobFailureQuery(Schema):
    after_seq = ma.fields.Integer(validate=ma.validate.Range(0, MAX_SEQ))
    limit = ma.fields.Integer(load_default=1000, validate=ma.validate.Range(1, MAX_FAILURE_PAGE))


class FailureSchema(ma.Schema):
    class Meta:
        ordered = True

    seq = ma.fields.Integer(
        required=True, metadata={"description": "The history's order; page with after_seq."}
    )
    job_id = ma.fields.String(required=True)
    queue = ma.fields.String(required=True)
    type = ma.fields.String(required=True)
    attempt = ma.fields.Integer(required=True, metadata={"description": "The attempt that failed."})
    outcome = ma.fields.String(
        required=True, metadata={"enum": ["retry", "dead"], "description": "Retried, or dead-lettered."}
    )
    failure_reason = ma.fields.String(
        required=True, metadata={"description": "Why it failed; Transient for a retried attempt."}
    )
    fingerprint = ma.fields.String(allow_none=True)
    error_line = ma.fields.String(allow_none=True, metadata={"description": "The error's first line."})
    error_details = ma.fields.String(allow_none=True)
    worker_id = ma.fields.String(allow_none=True)
    failed_at = fields.UtcDateTime(required=True)


class LocateSchema(Schema):
    ids = ma.fields.List(
        ma.fields.String(validate=ma.validate.Length(1, validation.MAX_ID)),
        required=True,
        validate=ma.validate.Length(1, 1000),
        metadata={"description": "At most 1000 job ids."},
    )


class LocatedSchema(ma.Schema):
    class Meta:
        ordered = True

    id = ma.fields.String(required=True)
    location = ma.fields.String(required=True, metadata={"enum": ["hot", "archive", "dlq", "gone"]})
    status = ma.fields.String(allow_none=True)
    failure_reason = ma.fields.String(allow_none=True)
    finished_at = fields.UtcDateTime(allow_none=True)
