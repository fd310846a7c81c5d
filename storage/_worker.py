"""The write pipeline's worker threads: one class, two uses.

A :class:`Worker` drains a queue on a thread of its own: it takes everything queued
(after letting more gather for up to ``linger`` seconds, unless a caller is waiting or
the backlog is full) and hands it to its job in one call. Two workers run behind the
store's thread:

- the **syncer** fdatasyncs the journal while the store's thread plans and writes the
  next batch; one fdatasync covers every batch written before it began, and their
  completions run in LSN order (answering callers, handing rows to the applier);
- the **applier** writes journaled batches into DuckDB off the commit path: it merges
  what is queued (the last state of each row wins) and writes it in one transaction,
  one statement per table, advancing the ``journal_lsn`` meta row in the same
  transaction. Readers that need the database call :meth:`Applier.wait_applied`
  first (a read barrier).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Final, Generic, TypeVar

import duckdb

from storage._rows import RowSet

__all__ = ["DEFAULT_LINGER", "DEFAULT_MAX_BACKLOG", "Applier", "Syncer", "Worker"]

T = TypeVar("T")
Completion = Callable[[BaseException | None], None]
_log = logging.getLogger("kittiwake.storage")
_WAIT_SLICE: Final = 1.0
DEFAULT_LINGER: Final = 0.25
DEFAULT_MAX_BACKLOG: Final = 512


class Worker(Generic[T]):
    """A thread running *job* on batches of queued items; see the module docstring.

    Args:
        job: called on the thread with everything taken at once, in order. What it
            raises stops the worker: ``error`` holds it and waiters are told.
        name: the thread's name.
        linger: seconds to let items gather before running *job*, unless
            :meth:`hurry` was called or ``max_backlog`` items are queued.
        max_backlog: queued items that start *job* at once, lingering or not.
    """

    def __init__(
        self, job: Callable[[list[T]], None], *, name: str, linger: float = 0.0,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
    ) -> None:  # fmt: skip
        self._job = job
        self._linger = linger
        self._max_backlog = max_backlog
        self._queue: deque[T] = deque()
        self.cond = threading.Condition()
        """Guards the queue; waiters on the worker's progress wait on it (notified after
        every job)."""
        self._urgent = False
        self._stopping = False
        self.error: BaseException | None = None
        self.jobs = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: T) -> None:
        """Queue *item*; never blocks on the job."""
        with self.cond:
            self._queue.append(item)
            if len(self._queue) == 1 or len(self._queue) >= self._max_backlog:
                self.cond.notify_all()  # the thread waits for a first item, or lingers

    def hurry(self) -> None:
        """End the current linger (call with ``cond`` held): someone waits for the job."""
        self._urgent = True
        self.cond.notify_all()

    @property
    def backlog(self) -> int:
        return len(self._queue)

    def stop(self) -> None:
        """Run the job on what is queued, then end the thread (waits for it)."""
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self._queue and not self._stopping:
                    self.cond.wait()
                if not self._queue:
                    return
                deadline = time.monotonic() + self._linger
                while not (self._urgent or self._stopping or len(self._queue) >= self._max_backlog):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.cond.wait(left)
                work = list(self._queue)
                self._queue.clear()
                self._urgent = False
            try:
                self._job(work)
            except BaseException as exc:  # noqa: BLE001 - reported to every waiter
                with self.cond:
                    self.error = exc
                    self.cond.notify_all()
                return
            with self.cond:
                self.jobs += 1
                self.cond.notify_all()


class Syncer:
    """Runs *sync* for queued completions and calls each with the outcome.

    Args:
        sync: makes everything written so far durable; raises on failure.

    After a failed sync every queued and later completion gets that error.
    """

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._error: BaseException | None = None
        self.syncs = 0
        self.last_sync_seconds = 0.0
        """How long the latest sync took."""
        self._worker: Worker[Completion] = Worker(self._complete, name="kittiwake-sync")

    def submit(self, completion: Completion) -> None:
        """Queue the completion of a batch already written; never blocks on the disk."""
        self._worker.submit(completion)

    def stop(self) -> None:
        """Sync and complete what is queued, then end the thread (waits for it)."""
        self._worker.stop()

    def _complete(self, work: list[Completion]) -> None:
        if self._error is None:
            try:
                started = time.perf_counter()
                self._sync()
                self.last_sync_seconds = time.perf_counter() - started
                self.syncs += 1
            except BaseException as exc:  # noqa: BLE001 - every completion is told
                self._error = exc
        for completion in work:
            try:
                completion(self._error)
            except Exception:  # a failing completion must not strand the ones after it
                _log.exception("a sync completion failed")


class Applier:
    """Applies journaled batches to DuckDB in LSN order on its own connection.

    Args:
        conn: a connection (cursor) to the store's database used only by this thread.
        applied_lsn: the ``journal_lsn`` the database holds now.
        linger: seconds to let batches gather before a transaction, unless a reader
            is waiting at the barrier (DuckDB's cost is per statement, not per row:
            at 20 ms, DuckDB took a third of a sequential prompt's CPU).
        max_backlog: queued batches that start a transaction at once, lingering or not
            (they and the cache entries they pin are what the linger holds in memory).
    """

    def __init__(
        self, conn: duckdb.DuckDBPyConnection, applied_lsn: int, *,
        linger: float = DEFAULT_LINGER, max_backlog: int = DEFAULT_MAX_BACKLOG,
    ) -> None:  # fmt: skip
        self.conn = conn
        """The applier's connection; its owner releases it after :meth:`stop`."""
        self.applied_lsn = applied_lsn
        self.batches = 0
        self._worker: Worker[tuple[RowSet, int]] = Worker(
            self._apply, name="kittiwake-applier", linger=linger, max_backlog=max_backlog
        )

    @property
    def error(self) -> BaseException | None:
        return self._worker.error

    @property
    def transactions(self) -> int:
        return self._worker.jobs

    @property
    def backlog(self) -> int:
        return self._worker.backlog

    def submit(self, rows: RowSet, lsn: int) -> None:
        """Queue one journaled batch's rows; never blocks on DuckDB."""
        self._worker.submit((rows, lsn))

    def wait_applied(self, lsn: int) -> None:
        """Block until every batch up to *lsn* is in DuckDB.

        Raises:
            RuntimeError: the applier failed; the store must be reopened.
        """
        worker = self._worker
        with worker.cond:
            while self.applied_lsn < lsn and worker.error is None:
                worker.hurry()
                worker.cond.wait(_WAIT_SLICE)
            if worker.error is not None:
                raise RuntimeError(f"applying to the database failed: {worker.error}")

    def note_applied(self, lsn: int) -> None:
        """Record that *lsn* was written to DuckDB directly (with nothing queued before it)."""
        with self._worker.cond:
            self.applied_lsn = max(self.applied_lsn, lsn)
            self._worker.cond.notify_all()

    def stop(self) -> None:
        """Apply what is queued, then end the thread (waits for it)."""
        self._worker.stop()

    def _apply(self, work: list[tuple[RowSet, int]]) -> None:
        merged = RowSet()
        for rows, _ in work:
            merged.merge(rows)
        conn = self.conn
        conn.execute("begin")
        try:
            for sql, columns in merged.statements():
                conn.execute(sql, columns)
            conn.execute("update meta set value = ? where key = 'journal_lsn'", [work[-1][1]])
            conn.execute("commit")
        except BaseException:
            conn.execute("rollback")
            raise
        with self._worker.cond:  # the worker notifies waiters once this returns
            self.applied_lsn = work[-1][1]
            self.batches += len(work)
