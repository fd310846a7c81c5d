"""Verified backups of the database file, and when the store takes one.

A backup is a copy of the checkpointed database file, fsynced, opened read-only and
read in full, then renamed over the previous backup (and the directory fsynced), so at
every instant the data dir holds exactly one verified backup: the old one until the
new one is verified and installed. Only then may the journal let go of the records
the new backup covers (:meth:`storage.Journal.release_through`).

When: the schedule counts what the journal holds, not what a process wrote, so it
holds across restarts. The journal is emptied by each backup's release, so the records
and bytes it holds are exactly the durable progress since the last verified backup,
and a crash loop or a string of one-shot processes crosses the threshold like one
long-lived process does.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Final

import duckdb

from runtime import StorageError
from storage._journal import Journal

__all__ = [
    "BACKUP_FILE",
    "DEFAULT_BACKUP_BATCHES",
    "DEFAULT_BACKUP_JOURNAL_BYTES",
    "STAGING_FILE",
    "BackupSchedule",
    "check_tables",
    "remove_staging",
    "write_backup",
]

_log = logging.getLogger("kittiwake.storage")
BACKUP_FILE: Final = "kittiwake.duckdb.backup"
STAGING_FILE: Final = BACKUP_FILE + ".tmp"
_CHECKED: Final = "kittiwake_backup_check"
"""The name the copy being verified is attached under."""
DEFAULT_BACKUP_BATCHES: Final = 2000
"""Journaled batches (journal records) that make a backup due."""
DEFAULT_BACKUP_JOURNAL_BYTES: Final = 8 * 1024 * 1024
"""Journal bytes that make a backup due, whatever the number of batches."""


class BackupSchedule:
    """Whether a backup is due, from what the journal holds.

    Args:
        batches: a backup is due once the journal holds this many records (batches).
        journal_bytes: ... or this many bytes of records.

    After a failed backup, the next one is due only once the journal has grown by a
    further threshold (so a failing disk does not pay for a copy after every batch);
    a success, or a new process, starts from what the journal holds again.
    """

    __slots__ = ("_floor_bytes", "_floor_records", "batches", "journal_bytes")

    def __init__(
        self, *, batches: int = DEFAULT_BACKUP_BATCHES,
        journal_bytes: int = DEFAULT_BACKUP_JOURNAL_BYTES,
    ) -> None:  # fmt: skip
        if batches <= 0:
            raise ValueError(f"backup batches must be positive, got {batches}")
        if journal_bytes <= 0:
            raise ValueError(f"backup journal bytes must be positive, got {journal_bytes}")
        self.batches = batches
        self.journal_bytes = journal_bytes
        self._floor_records = 0
        self._floor_bytes = 0

    def due(self, journal: Journal) -> bool:
        """Whether the journal holds enough since the last backup (or failed attempt)."""
        return (
            journal.held_records - self._floor_records >= self.batches
            or journal.held_bytes - self._floor_bytes >= self.journal_bytes
        )

    def failed(self, journal: Journal) -> None:
        """A backup failed: wait for another threshold's worth before trying again."""
        self._floor_records, self._floor_bytes = journal.held_records, journal.held_bytes

    def succeeded(self) -> None:
        self._floor_records = self._floor_bytes = 0


def check_tables(conn: duckdb.DuckDBPyConnection, database: str | None = None) -> None:
    """Read every table of *database* (the connection's own by default) in full, so a
    damaged block raises now.

    ``count(*)`` is answered from metadata; hashing whole rows reads (and checksums)
    every data block.
    """
    name = database
    if name is None:
        row = conn.execute("select current_database()").fetchone()
        assert row is not None
        name = str(row[0])
    tables = conn.execute(
        "select table_name from duckdb_tables() where database_name = ?", [name]
    ).fetchall()
    for (table,) in tables:
        conn.execute(f'select count(*), bit_xor(hash(t)) from "{name}"."{table}" as t').fetchone()


def write_backup(directory: Path, source: Path, lsn: int, conn: duckdb.DuckDBPyConnection) -> float:
    """Copy *source* (checkpointed, holding journal LSN *lsn*) to the verified backup.

    The copy is written beside the backup as ``STAGING_FILE``, fsynced, attached
    read-only to *conn* (the store's connection: no second DuckDB instance to start)
    and read in full, checked to hold *lsn*, detached, then renamed over
    ``BACKUP_FILE`` and the directory fsynced. Returns the seconds it took.

    On failure the staging file is removed and the previous backup is untouched; a
    crash at any point leaves the previous backup or the new, verified one, and at
    most a staging file that :func:`remove_staging` clears at the next open.

    Raises:
        StorageError: the copy did not open, read or hold *lsn*.
        OSError: the copy or the rename failed.
    """
    started = time.perf_counter()
    staging = directory / STAGING_FILE
    try:
        _copy_file(source, staging)
        _verify(staging, lsn, conn)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    _install(staging, directory / BACKUP_FILE)
    return time.perf_counter() - started


def remove_staging(directory: Path) -> None:
    """Delete a staging copy a crash left behind (it was never verified)."""
    staging = directory / STAGING_FILE
    if staging.exists():
        _log.warning("removing an unfinished backup copy", extra={"path": str(staging)})
        staging.unlink()


def _copy_file(source: Path, target: Path) -> None:
    shutil.copyfile(source, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _verify(path: Path, lsn: int, conn: duckdb.DuckDBPyConnection) -> None:
    try:
        conn.execute("attach ? as " + _CHECKED + " (read_only)", [str(path)])
    except duckdb.Error as exc:
        raise StorageError(f"backup copy does not open: {exc}") from exc
    try:
        check_tables(conn, _CHECKED)
        row = conn.execute(
            f"select value from {_CHECKED}.meta where key = 'journal_lsn'"
        ).fetchone()
    except duckdb.Error as exc:
        raise StorageError(f"backup copy does not read back: {exc}") from exc
    finally:
        conn.execute("detach " + _CHECKED)
    if row is None or int(row[0]) != lsn:
        raise StorageError(f"backup copy holds lsn {row}, expected {lsn}")


def _install(staging: Path, backup: Path) -> None:
    """Rename the verified copy over the backup, durably, before any journal release."""
    os.replace(staging, backup)
    dir_fd = os.open(backup.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
