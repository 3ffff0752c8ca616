"""Job snapshots as DataFrames, read straight from the database in keyset pages.

Filters are pushed down to SQL (the same `dlq_where` / `archive_where` / `hot_where` fragments the Store
pages with). Pages follow (time, id) order with a keyset cursor, never OFFSET, so page k costs the same as
page 1 at a million rows. PostgreSQL pages arrive as CSV text (see sql/postgresql/queries.sql), SQLite
pages as rows; both end in `columns.normalise`, so the frames are identical.
"""

from __future__ import annotations

import contextlib
import enum
import io
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

import pandas as pd

from chokaq_ops import errors
from chokaq_ops.analysis import columns as C
from chokaq_ops.models import ArchiveFilter, DlqFilter, HotFilter
from chokaq_ops.storage import Store

DEFAULT_CHUNK = 50_000
_RETRIES = 3
_CSV_HEADER = ("csv", "n", "after_at", "after_id")
# read_csv dtypes for PostgreSQL pages; times arrive as integers (microseconds) and are converted later.
_CSV_DTYPES: dict[str, Any] = dict.fromkeys(C.STRING_COLUMNS, C.STRING_DTYPE) | {
    C.QUEUE: "category",
    C.TYPE: "category",
}


def dlq_params(store: Store, flt: DlqFilter | None) -> dict[str, Any]:
    return store.dlq_filter_params(flt)


def archive_params(flt: ArchiveFilter | None) -> dict[str, Any]:
    from chokaq_ops import validation

    flt = flt or ArchiveFilter()
    return {
        "queue": validation.text(flt.queue, "queue", max_len=validation.MAX_QUEUE, required=False),
        "type": validation.text(flt.type, "type", max_len=validation.MAX_TYPE, required=False),
        "finished_from": flt.finished_from,
        "finished_to": flt.finished_to,
        "created_from": flt.created_from,
        "created_to": flt.created_to,
        "tag_like": validation.tag_pattern(flt.tag),
        "search_like": validation.like_pattern(flt.search),
    }


def hot_params(flt: HotFilter | None) -> dict[str, Any]:
    from chokaq_ops import validation

    flt = flt or HotFilter()
    return {
        "status": int(flt.status) if flt.status is not None else None,
        "queue": validation.text(flt.queue, "queue", max_len=validation.MAX_QUEUE, required=False),
        "type": validation.text(flt.type, "type", max_len=validation.MAX_TYPE, required=False),
        "tag_like": validation.tag_pattern(flt.tag),
        "search_like": validation.like_pattern(flt.search),
    }


def iter_job_pages(
    store: Store,
    location: str,
    params: Mapping[str, Any],
    *,
    heavy: bool = True,
    chunk_size: int = DEFAULT_CHUNK,
    limit: int | None = None,
    on_rows: Callable[[int], None] | None = None,
) -> Iterator[pd.DataFrame]:
    """Yield normalised job frames of at most `chunk_size` rows, oldest first, until `limit` rows.

    `location` is dlq, archive or hot; `params` are the bound filter parameters of that table. The next
    page is read by a helper thread while this one is parsed: the database builds page k+1 while pandas
    parses page k, which nearly halves the time of a large load on a 2-core machine."""
    if location not in C.LOCATIONS:
        raise errors.ValidationError(f"location must be one of {', '.join(C.LOCATIONS)}", field="location")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise errors.ValidationError("chunk_size must be at least 1", field="chunk_size")
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise errors.ValidationError("limit must be 0 or more", field="limit")
    query = f"frame_{location}" + ("" if heavy else "_light")
    bound = {k: _bind(store, v) for k, v in params.items()}
    pages: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def fetch_all() -> None:
        after: tuple[Any, Any] = (None, None)
        loaded = 0
        try:
            while not stop.is_set() and (limit is None or loaded < limit):
                size = chunk_size if limit is None else min(chunk_size, limit - loaded)
                page = _fetch(
                    store, query, bound | {"after_at": after[0], "after_id": after[1], "limit": size}
                )
                if page.n == 0:
                    break
                loaded += page.n
                _put(pages, stop, ("page", page))
                if page.n < size:
                    break
                after = page.after(C.TIME_COLUMN_OF_LOCATION[location])
        except BaseException as exc:
            _put(pages, stop, ("error", exc))
        finally:
            _put(pages, stop, ("end", None))

    thread = threading.Thread(target=fetch_all, name=f"chokaq-frame-{location}", daemon=True)
    thread.start()
    loaded = 0
    try:
        while True:
            kind, item = pages.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            frame = item.frame()
            loaded += len(frame)
            if on_rows:
                on_rows(loaded)
            yield C.normalise(frame, location, heavy=heavy)
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on a full queue, then let it finish
            with contextlib.suppress(queue.Empty):
                pages.get(timeout=0.05)
        thread.join()


def _put(pages: queue.Queue[tuple[str, Any]], stop: threading.Event, item: tuple[str, Any]) -> None:
    while not stop.is_set():
        try:
            pages.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


def load_job_frame(store: Store, location: str, params: Mapping[str, Any], **kwargs: Any) -> pd.DataFrame:
    pages = list(iter_job_pages(store, location, params, **kwargs))
    if not pages:
        return C.empty_jobs(location, heavy=kwargs.get("heavy", True))
    return C.concat_jobs(pages)


class _Page:
    """One fetched page, parsed into a frame on the consumer's side."""

    def __init__(self, names: tuple[str, ...], rows: list[Any]) -> None:
        self.csv = names == _CSV_HEADER
        if self.csv:
            self.text, n, self.after_at, self.after_id = rows[0]
            self.n = int(n or 0)
        else:
            self.names, self.rows, self.n = names, rows, len(rows)

    def after(self, key_column: str) -> tuple[Any, Any]:
        if self.csv:
            return self.after_at, self.after_id
        last = dict(zip(self.names, self.rows[-1], strict=True))
        return last[key_column], last[C.ID]

    def frame(self) -> pd.DataFrame:
        if self.csv:
            # bytes parse faster than a StringIO: the C parser reads UTF-8 without a decoding layer
            return pd.read_csv(
                io.BytesIO(self.text.encode("utf-8")),
                dtype=_CSV_DTYPES,
                keep_default_na=False,
                na_values=[""],
                low_memory=False,
            )
        return pd.DataFrame.from_records(self.rows, columns=list(self.names), coerce_float=False)


def _fetch(store: Store, name: str, params: dict[str, Any]) -> _Page:
    statement = store.queries[name].statements[0]
    for attempt in range(_RETRIES + 1):
        try:
            with store.connection() as conn:
                cursor = conn.cursor()
                try:
                    store.dialect.execute(cursor, statement, params)
                    names = tuple(d[0].lower() for d in cursor.description)
                    return _Page(names, cursor.fetchall())
                finally:
                    cursor.close()
        except Exception as exc:
            if (
                not store.dialect.is_db_error(exc)
                or not store.dialect.is_transient(exc)
                or attempt == _RETRIES
            ):
                raise
            time.sleep(0.2 * 2**attempt)
    raise AssertionError("unreachable")


def _bind(store: Store, value: Any) -> Any:
    if isinstance(value, datetime):
        return store.format_time(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bool):
        return int(value)
    return value
