"""One root exception for the library; a subclass's docstring is its default message.

Messages are passed through `redact` on the way in: a database driver's text can quote a connection
string, and an error travels to logs, the CLI and API clients.
"""

from __future__ import annotations

from chokaq_ops.redact import redact


class ChokaqError(Exception):
    """chokaq failed."""

    def __init__(self, message: str | None = None, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(redact(message) if message else (self.__doc__ or "").strip())


class UsageError(ChokaqError):
    """Bad command-line usage (the CLI exits 2)."""


class ConfigError(ChokaqError):
    """The configuration is invalid."""


class ValidationError(ChokaqError):
    """The input is invalid."""


class JobNotFound(ChokaqError):
    """No such job."""


class InvalidState(ChokaqError):
    """The job is not in a state that allows this operation."""


class Conflict(ChokaqError):
    """The operation conflicts with existing data."""


class LabelMismatch(Conflict):
    """A labelled run asked for another selection than the one its label's unfinished plan froze.

    `bound` and `asked` are the two filters (as given); start over with `new=True` (`--new`)."""

    def __init__(
        self, message: str, *, bound: object = None, asked: object = None, field: str | None = "label"
    ) -> None:
        super().__init__(message, field=field)
        self.bound = bound
        self.asked = asked


class PlanBusy(Conflict):
    """Another run holds the plan's lease: one plan (one label) is worked by one run at a time.

    `holder` is who holds it and `seconds_left` how long its lease lasts unless renewed."""

    def __init__(
        self,
        message: str,
        *,
        holder: str | None = None,
        seconds_left: float | None = None,
        field: str | None = "lease",
    ) -> None:
        super().__init__(message, field=field)
        self.holder = holder
        self.seconds_left = seconds_left


class StorageError(ChokaqError):
    """The database failed."""


class TransientStorageError(StorageError):
    """The database failed in a way that is worth retrying."""


class ApiUnreachable(TransientStorageError):
    """The API could not be reached at all (refused, unresolvable, timed out connecting): the server never
    saw the request. An API that answers 5xx (its database down) raises TransientStorageError itself."""


class SchemaOutdated(StorageError):
    """The database schema is older than this version of chokaq; run `chokaq migrate`."""


class Unauthorized(ChokaqError):
    """Missing or invalid token."""


class Forbidden(ChokaqError):
    """The token's role does not allow this operation."""


class FatalJobError(ChokaqError):
    """The job cannot succeed by retrying; it goes to the dead-letter queue as Fatal."""


class ThrottledError(ChokaqError):
    """A downstream asked us to slow down; the job is retried after `retry_after` seconds."""

    def __init__(self, message: str | None = None, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PlanHalted(ChokaqError):
    """A paced plan stopped itself: its resurrected jobs failed again too often (or none finished).

    The plan stays `running`: nothing beyond the chunks already run was touched. `plan` is the Plan and
    `outcomes` the plan_outcomes report the decision was made on."""

    def __init__(self, message: str, *, plan: object = None, outcomes: dict | None = None) -> None:
        super().__init__(message)
        self.plan = plan
        self.outcomes = outcomes or {}
