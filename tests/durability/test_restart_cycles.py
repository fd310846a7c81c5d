"""Short-lived processes, cleanly closed or SIGKILLed, still back up and trim the journal.

A cycle opens the runtime on the same data dir (a real DuckDB file and journal), admits
prompts and closes it, or is SIGKILLed. The processes are real, forked by
``cycle_writer.py`` once it has imported the runtime; a clean one runs four cycles, a
killed one one. Backups used to be counted per open store, so such processes never
backed up and the journal grew with every cycle.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from storage import DB_FILE, EventStore, Journal
from storage._backup import (
    BACKUP_FILE,
    DEFAULT_BACKUP_BATCHES,
    DEFAULT_BACKUP_JOURNAL_BYTES,
    STAGING_FILE,
)
from storage._journal import DEFAULT_PREALLOCATE_BYTES

SERVER = Path(__file__).with_name("cycle_writer.py")
REPO = Path(__file__).resolve().parents[2]
CYCLES = 200
CYCLES_PER_PROCESS = 4
"""A process's first cycle pays DuckDB's first open (about 0.25 s against 0.1 s)."""
KILLS = 200
RECORD_HEADER_SLACK = 64
"""More than a journal record's header (it frames each batch's payload)."""


class Cycles:
    """The fork server: one process per cycle, all on *data*."""

    def __init__(self, data: Path, work: Path, backup_every: int, backup_bytes: int) -> None:
        self.work = work
        self.stderr = work / "children.err"
        """What the server and its children logged (a failed backup says why here)."""
        with self.stderr.open("w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, str(SERVER), str(data), str(backup_every), str(backup_bytes)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=REPO, text=True,
            )  # fmt: skip
        self.acknowledged: dict[str, str] = {}
        self.count = 0

    def _command(self, prompts: int, cycles: int = 1) -> tuple[int, Path]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        out = self.work / f"out{self.count}.txt"
        self.count += 1
        self.proc.stdin.write(f"{out} {prompts} {cycles}\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline()), out

    def _status(self) -> int:
        assert self.proc.stdout is not None
        return int(self.proc.stdout.readline())

    def clean(self, prompts: int, cycles: int) -> list[tuple[int, int]]:
        """*cycles* cycles in one process, each admitting *prompts* and closing the
        runtime; return what the journal held after each."""
        _, out = self._command(prompts, cycles)
        status = self._status()
        assert os.waitstatus_to_exitcode(status) == 0, self.count
        assert self._collect(out) >= prompts * cycles
        lines = out.read_text().splitlines()
        held = [(int(r), int(b)) for _, r, b in (x.split() for x in lines if x.startswith("held"))]
        assert len(held) == cycles and lines.count("ready") == cycles
        return held

    def killed(self, lifetime: float, *, early: bool) -> None:
        """One cycle SIGKILLed *lifetime* s after it got ready (after it started, if early)."""
        pid, out = self._command(0)
        deadline = time.monotonic() + 15
        while not early and (not out.exists() or "ready" not in out.read_text()):
            assert time.monotonic() < deadline, "the cycle never got ready"
            time.sleep(0.002)
        time.sleep(lifetime)
        os.kill(pid, signal.SIGKILL)
        assert os.waitstatus_to_exitcode(self._status()) == -signal.SIGKILL
        self._collect(out)

    def _collect(self, out: Path) -> int:
        lines = out.read_text().split("\n")[:-1] if out.exists() else []
        receipts = [line.split(" ") for line in lines if line.startswith("ses_")]
        for sid, mid in receipts:
            assert self.acknowledged.setdefault(mid, sid) == sid
        return len(receipts)

    def logged(self) -> str:
        """The children's log so far (their stderr)."""
        return self.stderr.read_text()

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            assert self.proc.wait(timeout=10) == 0
        finally:
            self.proc.stdout.close()


def _journal_on_disk(data: Path) -> int:
    return sum(p.stat().st_size for p in (data / "journal").glob("journal-*.seg"))


def _held(data: Path) -> tuple[int, int, int]:
    """(records, bytes, bytes of the last record's payload) the journal holds; opens it
    like the next cycle would. A record is one batch."""
    with Journal.open(data / "journal") as journal:
        last = 0
        if journal.held_records:
            for _, payload in journal.read(journal.next_lsn - 1):
                last = len(payload)
        return journal.held_records, journal.held_bytes, last


def _backup_stamp(data: Path) -> tuple[int, int] | None:
    """Tells backups apart: each is a new file renamed into place."""
    try:
        found = (data / BACKUP_FILE).stat()
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_mtime_ns


def _backup_lsn(data: Path) -> int:
    import duckdb

    with duckdb.connect(str(data / BACKUP_FILE), read_only=True) as conn:
        row = conn.execute("select value from meta where key = 'journal_lsn'").fetchone()
    assert row is not None
    return int(row[0])


def _check_everything_kept(
    data: Path, acknowledged: dict[str, str], contiguous: Callable[[EventStore], dict[str, int]]
) -> int:
    """Every acknowledged prompt is stored once, seqs are contiguous; return the last lsn."""
    store = EventStore.open(data)
    try:
        contiguous(store)
        rows = store.conn.execute("select id, session_id from session_input").fetchall()
        per_id = Counter(r[0] for r in rows)
        stored = dict(rows)
        for mid, sid in acknowledged.items():
            assert per_id[mid] == 1, mid
            assert stored[mid] == sid
        return store.journal_lsn()
    finally:
        store.close()


# Two hundred real processes: about a minute on a quiet machine, over two on two cores
# shared at a load of 12; the timeout only guards against a hang.
@pytest.mark.timeout(600)
def test_200_short_clean_processes_back_up_at_the_default_thresholds(
    tmp_path: Path, contiguous: Callable[[EventStore], dict[str, int]]
) -> None:
    data, started = tmp_path / "data", time.monotonic()
    cycles = Cycles(data, tmp_path, DEFAULT_BACKUP_BATCHES, DEFAULT_BACKUP_JOURNAL_BYTES)
    most_records = most_bytes = 0
    backups = set()
    try:
        # Two sessions admit at once, so on a loaded machine group commit merges some of
        # their prompts and 200 cycles may write fewer than 2,000 batches: cycles go on
        # (up to half as many again) until the first threshold's worth was written.
        ran = 0
        while ran < CYCLES or (_backup_stamp(data) is None and ran < CYCLES * 3 // 2):
            for records, size in cycles.clean(prompts=12, cycles=CYCLES_PER_PROCESS):
                most_records, most_bytes = max(most_records, records), max(most_bytes, size)
            ran += CYCLES_PER_PROCESS
            backups.add(_backup_stamp(data))
            assert not (data / STAGING_FILE).exists()
    finally:
        cycles.close()
    elapsed = time.monotonic() - started
    last_lsn = _check_everything_kept(data, cycles.acknowledged, contiguous)
    # The cycles wrote more than 2,000 batches, none of them more than a few dozen;
    # the journal held at most one threshold's worth, and the last backup covers all
    # but less than that.
    assert len(cycles.acknowledged) == ran * 12
    assert last_lsn >= DEFAULT_BACKUP_BATCHES
    assert len(backups - {None}) == last_lsn // DEFAULT_BACKUP_BATCHES
    assert most_records <= DEFAULT_BACKUP_BATCHES
    assert most_bytes <= DEFAULT_BACKUP_JOURNAL_BYTES
    assert last_lsn - _backup_lsn(data) < DEFAULT_BACKUP_BATCHES
    print(f"{elapsed:.1f} s, {last_lsn + 1} batches, most held {most_records} ({most_bytes} B)")


# Two hundred real processes: about a minute on a quiet machine, over two on two cores
# shared at a load of 12; the timeout only guards against a hang.
@pytest.mark.timeout(600)
def test_sigkilled_processes_keep_the_journal_bounded(
    tmp_path: Path, contiguous: Callable[[EventStore], dict[str, int]]
) -> None:
    """A crash loop: every cycle is SIGKILLed, a quarter of them while opening (when a
    backup due at open runs); thresholds are small so backups, and kills in them, are
    frequent. 200 kills; test_backup_kill.py also places kills at every step of a backup
    deterministically."""
    backup_every, backup_bytes = 150, 48 * 1024
    rng = random.Random(0x13)
    data, started = tmp_path / "data", time.monotonic()
    cycles = Cycles(data, tmp_path, backup_every, backup_bytes)
    most_records = most_bytes = most_before_last = largest_last = staging_left = 0
    most_zeros = 0
    backups = set()
    try:
        for n in range(KILLS):
            early = n % 4 == 3
            cycles.killed(rng.uniform(0.0, 0.12), early=early)
            staging_left += (data / STAGING_FILE).exists()
            backups.add(_backup_stamp(data))
            records, size, last = _held(data)
            most_zeros = max(most_zeros, _journal_on_disk(data) - size)
            most_records, most_bytes = max(most_records, records), max(most_bytes, size)
            most_before_last = max(most_before_last, size - last)
            largest_last = max(largest_last, last)
    finally:
        cycles.close()
    elapsed = time.monotonic() - started
    last_lsn = _check_everything_kept(data, cycles.acknowledged, contiguous)
    assert len(cycles.acknowledged) > 300
    assert len(backups - {None}) >= 5
    # The bound: a backup runs right after the batch that reaches a threshold, before
    # any later batch, and at the next open when a kill came first, so the journal
    # before its last batch always holds less than a threshold (on disk, plus the zeros
    # preallocated ahead of it). Only a failed attempt would let it grow on, and the
    # children log none. Batches vary: at open a drain promotes every prompt the killed
    # process left pending in one batch (tens of KB here), so what the journal holds in
    # all is bounded by a threshold plus the largest batch, not plus a few prompts.
    logged = cycles.logged()
    assert "backup failed" not in logged, logged
    assert most_records <= backup_every, logged
    assert most_before_last < backup_bytes + RECORD_HEADER_SLACK, logged
    assert most_zeros <= DEFAULT_PREALLOCATE_BYTES + 64 * 1024
    assert last_lsn - _backup_lsn(data) <= backup_every, logged
    assert (data / DB_FILE).exists()
    print(
        f"{elapsed:.1f} s, {len(cycles.acknowledged)} prompts, {last_lsn + 1} batches,"
        f" {len(backups - {None})} backups,"
        f" kills mid-copy {staging_left}, most held {most_records} ({most_bytes} B; before"
        f" its last batch {most_before_last} B), largest last batch {largest_last} B"
    )
