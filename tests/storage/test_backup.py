"""When the store backs up: counted from the journal, so across reopens; what a backup leaves."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import pytest

import storage._backup as backup_module
from runtime import Prompt, StorageError
from runtime import events as ev
from storage import AdmitPrompt, EventStore
from storage._backup import BACKUP_FILE, STAGING_FILE, BackupSchedule

_admitted = 0


def _info(session_id: str) -> ev.SessionInfo:
    return ev.SessionInfo(
        id=session_id, project_id="p", location=ev.Location(directory="/a"), title="t",
        time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip


def _work(store: EventStore, batches: int, *, text: str = "p") -> None:
    """*batches* batches: one admitted prompt each (the session is created as needed)."""
    global _admitted
    store.write_batch([lambda b: b.create_session(_info("ses_a"))])  # no event once it exists
    for _ in range(batches):
        _admitted += 1
        op = AdmitPrompt(
            session_id="ses_a", message_id=f"msg_{_admitted:06d}", prompt=Prompt(text=text),
            delivery="queue", timestamp=_admitted, fresh=True,
        )  # fmt: skip
        store.write_batch([op])


def _backup_lsn(directory: Path) -> int | None:
    if not (directory / BACKUP_FILE).exists():
        return None
    with duckdb.connect(str(directory / BACKUP_FILE), read_only=True) as conn:
        row = conn.execute("select value from meta where key = 'journal_lsn'").fetchone()
    return None if row is None else int(row[0])


def _segments(directory: Path) -> list[str]:
    return sorted(p.name for p in (directory / "journal").glob("*.seg"))


def test_the_count_holds_across_reopens(tmp_path: Path) -> None:
    """Twelve short-lived stores of five batches each: backups every 25 batches in all,
    though none of them wrote 25 itself (they used to count per process: none backed up)."""
    backups = 0
    for _ in range(12):
        store = EventStore.open(tmp_path, backup_every=25)
        try:
            _work(store, 5)
            stats = store.statistics()
            backups += stats.backups
            assert stats.journal_batches < 25
        finally:
            store.close()
    store = EventStore.open(tmp_path, backup_every=25)
    try:
        last = store.journal_lsn()
        assert store.statistics().journal_batches == last - 49  # since the second backup
    finally:
        store.close()
    assert last == 60  # the session, then 60 prompts
    assert backups == 2
    assert _backup_lsn(tmp_path) == 49
    assert _segments(tmp_path) == ["journal-0000000000000050.seg"]


def test_the_journal_size_makes_a_backup_due_too(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path, backup_every=10**6, backup_journal_bytes=16 * 1024)
    try:
        _work(store, 30, text="x" * 2000)
        stats = store.statistics()
        assert stats.backups >= 3
        assert stats.journal_bytes < 16 * 1024
        assert stats.last_backup_seconds > 0
    finally:
        store.close()
    assert _backup_lsn(tmp_path) == 30 - stats.journal_batches


def test_a_backup_due_at_open_runs_before_the_store_serves(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path, backup_every=10**6)
    _work(store, 40)
    store.close()
    assert _backup_lsn(tmp_path) is None
    (tmp_path / STAGING_FILE).write_bytes(b"a copy a crash cut short")
    store = EventStore.open(tmp_path, backup_every=30)
    try:
        stats = store.statistics()
        assert (stats.backups, stats.journal_batches, stats.journal_bytes) == (1, 0, 0)
    finally:
        store.close()
    assert _backup_lsn(tmp_path) == 40
    assert not (tmp_path / STAGING_FILE).exists()
    assert _segments(tmp_path) == ["journal-0000000000000041.seg"]


def test_a_failed_backup_is_logged_and_retried_after_another_threshold(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = EventStore.open(tmp_path, backup_every=10)
    try:
        _work(store, 9)
        assert _backup_lsn(tmp_path) == 9
        (tmp_path / STAGING_FILE).mkdir()  # the copy cannot be written
        with caplog.at_level(logging.ERROR, logger="kittiwake.storage"):
            _work(store, 10)
        assert [r.message for r in caplog.records].count(
            "backup failed; the journal keeps growing until one succeeds"
        ) == 1
        [failed] = caplog.records
        assert failed.error.startswith(("IsADirectoryError", "PermissionError", "OSError"))
        assert (failed.journal_records, failed.retry_at_records) == (10, 20)
        assert store.statistics().journal_batches == 10  # nothing released
        assert _backup_lsn(tmp_path) == 9  # the previous backup stays
        _work(store, 9)
        assert len(caplog.records) == 1  # not retried after every batch
        (tmp_path / STAGING_FILE).rmdir()
        _work(store, 1)  # another threshold's worth: retried, and it succeeds
        assert store.statistics().journal_batches == 0
        assert _backup_lsn(tmp_path) == 29
    finally:
        store.close()


def test_thresholds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batches"):
        BackupSchedule(batches=0)
    with pytest.raises(ValueError, match="bytes"):
        BackupSchedule(journal_bytes=0)


def test_a_copy_that_does_not_verify_replaces_nothing_and_releases_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EventStore.open(tmp_path, backup_every=10**6)
    try:
        _work(store, 5)
        assert store.checkpoint_and_backup() == 5
        _work(store, 5)

        def torn(source: Path, target: Path) -> None:
            data = source.read_bytes()
            target.write_bytes(data[: len(data) // 2])

        monkeypatch.setattr(backup_module, "_copy_file", torn)
        with pytest.raises(StorageError, match="backup copy"):
            store.checkpoint_and_backup()
        assert not (tmp_path / STAGING_FILE).exists()
        assert store.statistics().journal_batches == 5
        assert _backup_lsn(tmp_path) == 5
        monkeypatch.undo()
        assert store.checkpoint_and_backup() == 10
    finally:
        store.close()


def test_a_database_older_than_the_journal_is_replaced_by_the_backup(tmp_path: Path) -> None:
    """A power loss can undo DuckDB's unsynced checkpoint after a backup released the
    journal: the backup and the journal still hold everything."""
    store = EventStore.open(tmp_path, backup_every=10**6)
    _work(store, 5)
    store.close()
    stale = (tmp_path / "kittiwake.duckdb").read_bytes()  # holds lsn 5
    store = EventStore.open(tmp_path, backup_every=10**6)
    try:
        _work(store, 5)
        assert store.checkpoint_and_backup() == 10
        _work(store, 3)
    finally:
        store.close()
    (tmp_path / "kittiwake.duckdb").write_bytes(stale)
    store = EventStore.open(tmp_path)
    try:
        assert store.journal_lsn() == 13
        assert store.statistics().rebuilt
        assert store.statistics().recovered_batches == 3
        rows = store.conn.execute("select id from session_input order by id").fetchall()
        assert [r[0] for r in rows] == [
            f"msg_{n:06d}" for n in range(_admitted - 12, _admitted + 1)
        ]
    finally:
        store.close()
    assert len(list(tmp_path.glob("kittiwake.duckdb.corrupt-*"))) == 1
