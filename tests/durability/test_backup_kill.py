"""SIGKILL at every step of a backup loses nothing; the next open recovers and backs up.

``backup_killer.py`` kills itself (SIGKILL) at a chosen step of a backup, while running
or in the backup due at open. After each kill: the data dir holds one verified backup
(the previous one until the new one was installed) and a journal reaching back to it,
so even a lost database file is rebuilt whole from the backup and the journal; the
next open recovers every acknowledged prompt and the next backup empties the journal.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from storage import DB_FILE, EventStore, Journal
from storage._backup import BACKUP_FILE, STAGING_FILE

KILLER = Path(__file__).with_name("backup_killer.py")
REPO = Path(__file__).resolve().parents[2]
BEFORE_INSTALL = ("copy", "torn-copy", "verified")
AFTER_INSTALL = ("installed", "rotated", "released")


class Run:
    def __init__(self, stdout: str, returncode: int) -> None:
        lines = stdout.splitlines()
        self.returncode = returncode
        self.started = [int(line.split()[-1]) for line in lines if line.startswith("backing up")]
        self.installed = [int(line.split()[-1]) for line in lines if line.startswith("backed up")]
        self.receipts = [line for line in lines if line.startswith("msg_")]
        self.died = "dying" in lines


def _run(data: Path, point: str, backup_every: int, prompts: int, nth: int) -> Run:
    done = subprocess.run(
        [sys.executable, str(KILLER), str(data), point, str(backup_every), str(prompts), str(nth)],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert done.returncode in (0, -signal.SIGKILL), done.stderr
    return Run(done.stdout, done.returncode)


def _backup_lsn(data: Path) -> int:
    with duckdb.connect(str(data / BACKUP_FILE), read_only=True) as conn:
        row = conn.execute("select value from meta where key = 'journal_lsn'").fetchone()
    assert row is not None
    return int(row[0])


def _stored(
    data: Path, contiguous: Callable[[EventStore], dict[str, int]]
) -> tuple[set[str], EventStore]:
    store = EventStore.open(data)
    contiguous(store)
    ids = [r[0] for r in store.conn.execute("select id from session_input").fetchall()]
    assert len(ids) == len(set(ids))
    return set(ids), store


def _check_after_kill(
    data: Path, tmp_path: Path, point: str, killed: Run, acknowledged: set[str],
    previous_backup: int, contiguous: Callable[[EventStore], dict[str, int]],
) -> None:  # fmt: skip
    assert killed.returncode == -signal.SIGKILL and killed.died
    lsn = killed.started[-1]
    # One verified backup: the previous one until the new one was installed.
    expected = previous_backup if point in BEFORE_INSTALL else lsn
    assert _backup_lsn(data) == expected
    assert (data / STAGING_FILE).exists() == (point in ("torn-copy", "verified"))
    with Journal.open(data / "journal") as journal:
        assert journal.first_lsn <= expected + 1  # the journal reaches back to the backup
        if point in ("rotated", "released"):  # a new, empty segment after the covered ones
            assert journal.next_lsn == lsn + 1 and journal.held_records > 0
            newest = max((data / "journal").glob("*.seg"))
            assert newest.name == f"journal-{lsn + 1:016d}.seg" and newest.stat().st_size == 0
        if point == "released":  # one covered segment went, the others wait for the next
            assert previous_backup + 1 < journal.first_lsn
    # The backup and the journal alone hold everything: lose the database file.
    lost = tmp_path / f"lost-{point}"
    shutil.copytree(data, lost)
    (lost / DB_FILE).unlink()
    ids, store = _stored(lost, contiguous)
    try:
        assert store.statistics().rebuilt
        assert acknowledged <= ids
    finally:
        store.close()
    # The next open recovers everything; the next backup empties the journal.
    ids, store = _stored(data, contiguous)
    try:
        assert acknowledged <= ids
        assert not (data / STAGING_FILE).exists()
        last = store.checkpoint_and_backup()
        assert store.statistics().journal_batches == 0
    finally:
        store.close()
    assert _backup_lsn(data) == last >= lsn
    assert [p.name for p in (data / "journal").glob("*.seg")] == [f"journal-{last + 1:016d}.seg"]


@pytest.mark.parametrize("point", BEFORE_INSTALL + AFTER_INSTALL)
def test_kill_during_a_backup_while_running(
    tmp_path: Path, point: str, contiguous: Callable[[EventStore], dict[str, int]]
) -> None:
    data = tmp_path / "data"
    killed = _run(data, point, backup_every=40, prompts=120, nth=2)
    # the first backup, then the kill in the second (after its copy went in, for the last two)
    assert len(killed.installed) == (2 if point in ("rotated", "released") else 1)
    assert len(killed.receipts) >= 70
    _check_after_kill(
        data, tmp_path, point, killed, set(killed.receipts), killed.installed[0], contiguous
    )


@pytest.mark.parametrize("point", ["torn-copy", "installed", "released"])
def test_kill_during_the_backup_due_at_open(
    tmp_path: Path, point: str, contiguous: Callable[[EventStore], dict[str, int]]
) -> None:
    """A process that wrote past the threshold of the next one; that one backs up at
    open, before it serves, and is killed there."""
    data = tmp_path / "data"
    first = _run(data, "none", backup_every=40, prompts=70, nth=0)
    assert first.returncode == 0 and len(first.installed) == 1
    killed = _run(data, point, backup_every=15, prompts=10, nth=1)
    assert killed.receipts == [] and killed.started[-1] > first.installed[0]
    _check_after_kill(
        data, tmp_path, point, killed, set(first.receipts), first.installed[0], contiguous
    )
