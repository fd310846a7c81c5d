"""The DuckDB store's state: its settings, connection, journal, workers and caches; and how it
obtains its database connections.

How the DuckDB store obtains, shares and releases its database connections.

The store calls its :class:`DatabaseOpener` for the connection to its database file,
for each cursor handed to another thread (the applier's), and to release them. The
default, :data:`OS_DATABASE`, starts one DuckDB instance per opening
(``duckdb.connect(path)``). A process that opens many stores one after another (the
simulator, ``sims``) may instead attach each file to one long-lived instance; the files
are DuckDB database files either way, and the store's SQL is the same.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import duckdb

from runtime import IdGenerator, SessionMessage, StorageError
from runtime import events as ev
from storage._backup import DEFAULT_BACKUP_BATCHES, DEFAULT_BACKUP_JOURNAL_BYTES, BackupSchedule
from storage._batch import EpochRow, WriteBatch
from storage._journal import DEFAULT_SEGMENT_MAX_BYTES, OS_FILES, Journal, JournalFiles
from storage._leases import LeaseTable, monotonic_ms
from storage._worker import Applier, Syncer

if TYPE_CHECKING:
    from storage._caches import _History, _SessionRow

__all__ = ["DB_FILE", "OS_DATABASE", "DatabaseOpener", "StoreState"]

DB_FILE: Final = "kittiwake.duckdb"


class DatabaseOpener:
    """Opens the store's database file as a DuckDB connection: a new DuckDB instance
    per :meth:`connect`. Subclass it to obtain connections another way.

    Every call runs on the thread that calls it and blocks it; none is cancellable.
    """

    def connect(self, path: Path, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
        """A connection whose unqualified names resolve in the database file *path*
        (created when missing), with DuckDB settings *config*.

        Raises:
            duckdb.Error: the file does not open as a DuckDB database.
        """
        return duckdb.connect(str(path), config=config)

    def cursor(self, conn: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
        """Another connection to *conn*'s database, for another thread; release it with
        :meth:`close` before *conn*."""
        return conn.cursor()

    def close(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Release *conn* (from :meth:`connect` or :meth:`cursor`); a connection from
        :meth:`connect` leaves its database file closed, checkpointed as DuckDB does at
        close.

        Raises:
            duckdb.Error: DuckDB failed to close the file (the connection is released).
        """
        conn.close()


OS_DATABASE: Final = DatabaseOpener()
"""The default opener: one DuckDB instance per opening of the store."""


class StoreState:
    """What every part of :class:`storage.EventStore` shares (its arguments are the
    store's): settings, the connection, the journal, the workers, the caches, and
    the read barrier."""

    def __init__(
        self, directory: Path, *, fsync: bool = True,
        backup_every: int = DEFAULT_BACKUP_BATCHES,
        backup_journal_bytes: int = DEFAULT_BACKUP_JOURNAL_BYTES,
        journal_segment_bytes: int = DEFAULT_SEGMENT_MAX_BYTES,
        db_fsync: bool = False, db_memory_mb: int = 128, db_threads: int = 1,
        sync_thread: bool = False, journal_files: JournalFiles = OS_FILES,
        ids: IdGenerator | None = None, lease_clock: Callable[[], int] = monotonic_ms,
        database: DatabaseOpener = OS_DATABASE,
    ) -> None:  # fmt: skip
        self.directory = directory
        self._fsync = fsync
        self._db_fsync = db_fsync
        self._db_memory_mb = db_memory_mb
        self._db_threads = db_threads
        self._schedule = BackupSchedule(batches=backup_every, journal_bytes=backup_journal_bytes)
        self._segment_bytes = journal_segment_bytes
        self._backups = 0
        self._last_backup_seconds = 0.0
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._journal: Journal | None = None
        self._sessions: dict[str, _SessionRow] = {}
        self._inputs: OrderedDict[str, ev.InputAdmitted] = OrderedDict()
        self._messages: OrderedDict[str, tuple[str, int, SessionMessage]] = OrderedDict()
        self._epochs: dict[str, EpochRow | None] = {}
        self._stats = dict(batches=0, operations=0, events=0, last_batch_size=0)
        self._last_commit_ms = 0.0
        self._recovered = 0
        self._rebuilt = False
        self._ids = ids or IdGenerator()
        self._journal_files = journal_files
        self._database = database
        self._absent: set[str] = set()
        self._applier: Applier | None = None
        self._pinned: dict[str, int] = {}
        self._histories: OrderedDict[str, _History] = OrderedDict()
        self._generations = 0
        self._lsn = -1
        self._unapplied: tuple[WriteBatch, int] | None = None
        self._sync_thread = sync_thread
        self._syncer: Syncer | None = None
        self._inline_sync_seconds = 0.0
        self._permissions: OrderedDict[str, ev.PermissionInfo] = OrderedDict()
        self._approvals: set[tuple[str, str, str]] | None = None
        self._deleted: set[str] = set()
        """Sessions deleted by this process: unread even while DuckDB still holds their rows."""
        self._leases = LeaseTable(lease_clock)
        """Leases (``storage._leases``): in memory here, one process holds the store."""
        self.broken = False
        self.in_doubt: deque[tuple[str, int]] = deque()
        """(session, seq) of events in batches whose callers were told they failed, yet
        may be in the store once it is reopened (the pages reached the file). Appended
        by the thread that failed the batch, before its callers are answered; taken by
        the StorageActor, which publishes the ones the reopened store holds."""

    @property
    def conn(self) -> duckdb.DuckDBPyConnection:
        if self._conn is None:
            raise StorageError("store is closed")
        return self._conn

    def new_event_id(self) -> str:
        return self._ids.new("evt")

    def journal_lsn(self) -> int:
        """The journal lsn the database holds (its ``meta`` row)."""
        row = self.conn.execute("select value from meta where key = 'journal_lsn'").fetchone()
        return int(row[0]) if row else -1

    def _barrier(self) -> None:
        """Wait until DuckDB holds every journaled batch (for reads that query it); while a
        batch is written but not yet handed to the applier, every batch before it.

        Raises StorageError at once when the store is broken: a batch whose journal write
        or fdatasync failed never reaches the applier, so waiting for it would never end.
        """
        if self.broken:
            raise StorageError("the store failed a commit and must be reopened")
        if self._applier is not None:
            try:
                self._applier.wait_applied(
                    self._lsn if self._unapplied is None else self._unapplied[1]
                )
            except RuntimeError as exc:
                self.broken = True
                raise StorageError(str(exc)) from exc

    def _db(self) -> duckdb.DuckDBPyConnection:
        """The connection, after the read barrier."""
        self._barrier()
        return self.conn
