"""Opening the DuckDB store: connecting, restoring the verified backup when the database
is missing, unusable or behind the journal, and catching up from the journal.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any, Final

import duckdb

from runtime import StorageError
from storage._backup import BACKUP_FILE, check_tables
from storage._batch import WriteBatch
from storage._pipeline import JournalRecord, WritePipeline, decode_record
from storage._rows import RowSet
from storage._state import DB_FILE
from storage._tables import migrate

__all__ = ["StoreRecovery"]

_log = logging.getLogger("kittiwake.storage")


_REPLAY_CHUNK: Final = 512
"""Journal records replayed into one DuckDB transaction at start-up."""
_DB_ASYNC_THREADS: Final = 0
"""DuckDB's asynchronous I/O pool. It serves only Parquet and CSV scans, which the store
never runs, and defaults to four threads per CPU (up to 256), each started at connect."""


class StoreRecovery(WritePipeline):
    """How :class:`EventStore` opens and recovers; see the module docstring."""

    def _connect_checked(self) -> duckdb.DuckDBPyConnection:
        path = self.directory / DB_FILE
        backup = self.directory / BACKUP_FILE
        if not path.exists() and backup.exists():
            # A fresh empty file would need the whole journal, which the backup let go of.
            _log.error("database missing, restoring the verified backup")
            self._set_aside(path)  # a stray .wal must not replay onto the backup
            self._rebuilt = True
            shutil.copyfile(backup, path)
        try:
            return self._connect(path)
        except Exception as exc:  # noqa: BLE001 - any failure to open means rebuild
            _log.error("database unusable, rebuilding from backup and journal", exc_info=exc)
        self._set_aside(path)
        self._rebuilt = True
        if backup.exists():
            shutil.copyfile(backup, path)
            try:
                return self._connect(path)
            except Exception as exc:  # noqa: BLE001
                _log.error("backup unusable, rebuilding from journal alone", exc_info=exc)
                self._set_aside(path)
        return self._connect(path)

    def _restore_if_behind(self) -> None:
        """Replace a database older than the journal's start by the verified backup.

        A backup lets the journal go only after the database's checkpoint, but DuckDB's
        own writes are not fsynced (``db_fsync=False``): a power loss can leave an intact
        database from before that checkpoint. The backup (fsynced before the release)
        and the journal still hold everything. Without a backup, or with one that is
        behind too, :meth:`_catch_up` refuses to open.
        """
        assert self._journal is not None
        path, backup = self.directory / DB_FILE, self.directory / BACKUP_FILE
        if self._journal.first_lsn <= self.journal_lsn() + 1 or not backup.exists():
            return
        _log.error(
            "database older than the journal, restoring the verified backup",
            extra={"database_lsn": self.journal_lsn(), "journal_first": self._journal.first_lsn},
        )
        conn, self._conn = self.conn, None
        self._database.close(conn)
        self._set_aside(path)
        self._rebuilt = True
        shutil.copyfile(backup, path)
        self._conn = self._connect(path)

    def _db_config(self) -> dict[str, Any]:
        """DuckDB's settings, given at connect so no default-sized thread pool ever starts."""
        # Small OLTP batches: bound DuckDB's buffer pool and worker threads explicitly.
        config: dict[str, Any] = {
            "memory_limit": f"{self._db_memory_mb}MB",
            "threads": self._db_threads,
            "async_threads": _DB_ASYNC_THREADS,
        }
        if not self._db_fsync:
            # The fdatasynced journal is the durable record; the database trails it.
            config["fsync_mode"] = "NONE"
        return config

    def _connect(self, path: Path) -> duckdb.DuckDBPyConnection:
        conn = self._database.connect(path, self._db_config())
        try:
            # A session setting (not accepted at connect), inherited by cursors: without it a
            # statement running past 2 s (opening a large database, a checkpoint) draws a
            # progress bar on the server's terminal.
            conn.execute("set enable_progress_bar = false")
            found = migrate(conn, now_ms=time.time_ns() // 1_000_000)
            # Every data block is read now, so damage is found here and not on a later
            # write. A database created just now has no block to check.
            if found:
                check_tables(conn)
        except BaseException:
            self._database.close(conn)
            raise
        return conn

    def _set_aside(self, path: Path) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for suffix in ("", ".wal"):
            victim = Path(str(path) + suffix)
            if victim.exists():
                victim.rename(Path(f"{victim}.corrupt-{stamp}"))

    def _catch_up(self) -> None:
        assert self._journal is not None
        applied = self.journal_lsn()
        first = self._journal.first_lsn
        if first is not None and first > applied + 1:
            raise StorageError(
                f"journal starts at {first} but the database holds only up to {applied}"
            )
        pending, last, written = RowSet(), applied, applied
        for lsn, payload in self._journal.read(applied + 1):
            batch = self._replay(decode_record(payload))
            self._adopt(batch, lsn)  # pins its cache entries until DuckDB has them
            pending.merge(batch.rows())
            last = lsn
            self._recovered += 1
            if self._recovered % _REPLAY_CHUNK == 0:
                self._write(pending, last)
                pending, written = RowSet(), last
        if last > written:
            self._write(pending, last)
        if self._recovered:
            _log.warning("caught up from journal", extra={"batches": self._recovered})

    def _replay(self, record: JournalRecord) -> WriteBatch:
        """Plan one journal record again (against the caches and the database)."""
        batch = WriteBatch(self)
        for stored in record.events:
            batch.replay_event(stored)
        for epoch in record.epochs:
            batch.put_epoch(epoch)
        for approval in record.approvals:
            batch.save_approval(approval)
        for row in record.records:
            batch.put_record(row)
        return batch
