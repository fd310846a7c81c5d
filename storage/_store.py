"""The DuckDB event store: one connection, group-committed batches, projections, journal.

Not thread-safe: exactly one thread (the StorageActor's, or the trio thread in
inline mode) calls it. Writes go through :meth:`EventStore.write_batch`: every
command of a batch plans its events against an in-memory overlay, the batch is
appended to the journal (fdatasync), then written to DuckDB by the applier; only
then are callers answered. Caches are updated after the journal append, so a failed
batch leaves them as they were.

The store is assembled from its parts, each building on the one before: its state
(``_state``), the caches (``_caches``), the write pipeline (``_pipeline``, whose
syncer and applier are ``_worker.Worker`` threads), recovery (``_recovery``); and
the queries (``_queries``) on the caches. Commands of the port are carried out in
``_commands``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from storage._backup import remove_staging
from storage._batch import StoredEvent, WriteBatch
from storage._journal import Journal
from storage._pipeline import Outcome
from storage._queries import StoreQueries, StoreStatistics, decode_stored
from storage._recovery import StoreRecovery
from storage._state import DB_FILE
from storage._worker import Applier, Syncer

__all__ = ["DB_FILE", "EventStore", "Outcome", "StoreStatistics", "decode_stored"]


class EventStore(StoreRecovery, StoreQueries):
    """The store. Use :meth:`open`; close with :meth:`close`.

    Args:
        directory: the data dir holding ``kittiwake.duckdb`` and ``journal/``.
        fsync: fdatasync the journal before answering (off only in benchmarks).
        db_fsync: let DuckDB fsync its own commits too. Off by default: the journal
            is fdatasynced first, and a database that trails or loses it is caught up.
        db_memory_mb: DuckDB's memory limit (its buffer pool spills beyond it).
        db_threads: DuckDB's worker threads.
        backup_every: a checkpoint, verified backup and journal release runs once the
            journal holds this many batches. The journal is the count: it holds exactly
            the batches since the last verified backup, so the count survives restarts.
        backup_journal_bytes: ... or once the journal holds this many bytes.
        journal_segment_bytes: the journal starts a new segment file past this size.
        sync_thread: fdatasync the journal on a thread of its own, so the next batch is
            planned and written while the previous one syncs (the StorageActor's
            threaded mode); off, :meth:`write_batch` syncs before it returns.
        journal_files: the journal's file operations (``storage.JournalFiles``; the OS's).
        database: how the database file is opened as DuckDB connections
            (``storage.DatabaseOpener``; by default a DuckDB instance per opening).
        ids: makes the ids of stored events (a seeded one in simulations).
        lease_clock: the clock of the store's leases, in milliseconds (monotonic).
    """

    @classmethod
    def open(cls, directory: Path, **options: Any) -> EventStore:
        """Open (creating, rebuilding or catching up from the journal as needed).

        Raises:
            StorageError: the database and journal together cannot be made consistent.
        """
        store = cls(Path(directory), **options)
        try:
            store._open()
        except BaseException:
            # Release what opened (the journal's lock above all): a supervisor's next try
            # in this process would find the directory held.
            with contextlib.suppress(Exception):
                store.close()
            raise
        return store

    @staticmethod
    def check_free(directory: Path) -> None:
        """Return when no open store holds the data dir *directory* (see ``Journal.check_free``).

        Raises:
            JournalHeld: another open store holds it, naming the holder's process id.
        """
        Journal.check_free(Path(directory) / "journal")

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._journal = Journal.open(
            self.directory / "journal",
            fsync=self._fsync,
            segment_max_bytes=self._segment_bytes,
            files=self._journal_files,
        )
        remove_staging(self.directory)
        self._conn = self._connect_checked()
        self._restore_if_behind()
        self._catch_up()
        self._lsn = self.journal_lsn()
        self._applier = Applier(self._database.cursor(self._conn), self._lsn)
        # A crash loop never reaches the threshold's batch: back up now, before serving.
        self._maybe_backup()
        if self._sync_thread:
            self._syncer = Syncer(self._sync_journal)

    def close(self) -> None:
        """Apply what is queued, checkpoint and close; safe to call twice."""
        if self._syncer is not None:
            syncer, self._syncer = self._syncer, None
            syncer.stop()
        if self._applier is not None:
            applier, self._applier = self._applier, None
            try:
                applier.stop()
            finally:
                self._database.close(applier.conn)
        if self._conn is not None:
            try:
                self._conn.execute("checkpoint")
            finally:
                conn, self._conn = self._conn, None
                self._database.close(conn)
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def rebuild_from(self, events: Iterable[StoredEvent], *, batch: int = 500) -> None:
        """Replay *events* (from another store) into this empty store's projections."""
        current = WriteBatch(self)
        for stored in events:
            current.replay_event(stored)
            if len(current.events) >= batch:
                self._commit(current)
                self._adopt(current, self._lsn)
                current = WriteBatch(self)
        if current.events:
            self._commit(current)
            self._adopt(current, self._lsn)
