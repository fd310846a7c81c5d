"""The applier: a thread that writes journaled batches into DuckDB, off the commit path.

The StorageActor's thread plans a batch, appends it to the journal (fdatasync),
answers its callers and hands the batch's statements here. The applier takes
everything queued and writes it in one DuckDB transaction, advancing the
``journal_lsn`` meta row in the same transaction. Readers that need the
database call :meth:`Applier.wait_applied` first (a read barrier).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Final

import duckdb

__all__ = ["Applier", "Statements"]

Statements = list[tuple[str, list[list[Any]]]]
_WAIT_SLICE: Final = 1.0


class Applier:
    """Applies journaled batches to DuckDB in LSN order on its own connection.

    Args:
        conn: a connection (cursor) to the store's database used only by this thread.
        applied_lsn: the ``journal_lsn`` the database holds now.
    """

    def __init__(self, conn: duckdb.DuckDBPyConnection, applied_lsn: int) -> None:
        self._conn = conn
        self._queue: deque[tuple[Statements, int]] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self.applied_lsn = applied_lsn
        self.error: BaseException | None = None
        self.transactions = 0
        self.batches = 0
        self._thread = threading.Thread(target=self._run, name="kittiwake-applier", daemon=True)
        self._thread.start()

    def submit(self, statements: Statements, lsn: int) -> None:
        """Queue one journaled batch; never blocks on DuckDB."""
        with self._cond:
            self._queue.append((statements, lsn))
            self._cond.notify_all()

    def wait_applied(self, lsn: int) -> None:
        """Block until every batch up to *lsn* is in DuckDB.

        Raises:
            RuntimeError: the applier failed; the store must be reopened.
        """
        with self._cond:
            while self.applied_lsn < lsn and self.error is None:
                self._cond.wait(_WAIT_SLICE)
            if self.error is not None:
                raise RuntimeError(f"applying to the database failed: {self.error}")

    def note_applied(self, lsn: int) -> None:
        """Record that *lsn* was written to DuckDB directly (with nothing queued before it)."""
        with self._cond:
            self.applied_lsn = max(self.applied_lsn, lsn)
            self._cond.notify_all()

    @property
    def backlog(self) -> int:
        return len(self._queue)

    def stop(self) -> None:
        """Apply what is queued, then end the thread (waits for it)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                work = list(self._queue)
                self._queue.clear()
            try:
                self._apply(work)
            except BaseException as exc:  # noqa: BLE001 - reported to every waiter
                with self._cond:
                    self.error = exc
                    self._cond.notify_all()
                return
            with self._cond:
                self.applied_lsn = work[-1][1]
                self.transactions += 1
                self.batches += len(work)
                self._cond.notify_all()

    def _apply(self, work: list[tuple[Statements, int]]) -> None:
        conn = self._conn
        conn.execute("begin")
        try:
            for statements, _ in work:
                for sql, columns in statements:
                    conn.execute(sql, columns)
            conn.execute("update meta set value = ? where key = 'journal_lsn'", [work[-1][1]])
            conn.execute("commit")
        except BaseException:
            conn.execute("rollback")
            raise
