"""A bulk DLQ operation's chunks in flight together (Storage.BulkStreams, docs/configuration.md).

A resurrect or purge of 100,000 dead jobs runs in transactions of 1,000. One chunk at a time keeps one
backend busy while the client and the other core wait (docs/benchmarks.md, "Bulk operations with
chunks in flight together"). Here `width` threads each take the next chunk as soon as their last one
committed, each on a pooled connection and in its own transaction, exactly as the one-at-a-time loop
would run it; the calling thread reports each commit (the progress callback runs there, never in a
helper). The callers hand out chunks over disjoint rows, so the chunks in flight never wait on each
other.

What a chunk's transaction promises is unchanged: it commits all of its jobs or none, with its audit
rows. An error or a crash mid-operation leaves the committed chunks committed and every job in exactly
one table, as before; only the order in which chunks commit is no longer fixed. After an error no
thread takes another chunk, the chunks in flight end, and the first error is raised.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from chokaq_ops.storage.database import Database

T = TypeVar("T")
_END = object()


class Streams(Generic[T]):
    """Runs chunk calls `db.bulk_streams` at a time; `retried` turns true once any call took a transient
    retry (it may then have committed an attempt whose reply was lost: the caller recounts)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.width = max(1, int(db.bulk_streams))
        self.retried = False

    def run(self, calls: Iterator[Callable[[], T]], committed: Callable[[T], None]) -> None:
        """Run every call `calls` yields and pass each result to `committed` in this thread, in the order
        they commit. `calls` is advanced under a lock, by whichever thread is free: it may read the
        database to plan the next chunks while the others run theirs."""
        if self.width == 1:
            for call in calls:
                committed(self._counted(call))
            return
        lock = threading.Lock()
        stop = threading.Event()
        results: queue.SimpleQueue[object] = queue.SimpleQueue()

        def stream() -> None:
            try:
                while not stop.is_set():
                    with lock:
                        call = next(calls, None)
                    if call is None:
                        return
                    results.put(self._counted(call))
            except BaseException as exc:
                stop.set()
                results.put(_Failed(exc))
            finally:
                results.put(_END)

        # Each helper runs in a copy of the caller's context (tracing spans and the like).
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(stream,), name=f"chokaq-bulk-{i}")
            for i in range(self.width)
        ]
        for thread in threads:
            thread.start()
        failed: BaseException | None = None
        ended = 0
        try:
            while ended < len(threads):
                item = results.get()
                if item is _END:
                    ended += 1
                elif isinstance(item, _Failed):
                    failed = failed or item.exc
                elif failed is None:
                    committed(item)  # type: ignore[arg-type]
        except BaseException:
            stop.set()  # the caller's callback raised, or the caller was interrupted
            raise
        finally:
            for thread in threads:
                thread.join()
        if failed is not None:
            raise failed

    def _counted(self, call: Callable[[], T]) -> T:
        # thread_retries counts the calling thread's retries, so it is read in the thread that runs the call.
        before = self.db.thread_retries()
        result = call()
        if self.db.thread_retries() != before:
            self.retried = True
        return result


class _Failed:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
