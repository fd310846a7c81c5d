"""A damaged or missing database file is rebuilt from the backup and journal; nothing is lost."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from runtime import InputAdmitted, Location, Prompt, open_runtime
from storage import DB_FILE, Backup, EventStore, Journal

BLOCK = 256 * 1024  # DuckDB's storage block; the file starts with three 4 KiB headers
HEADERS = 3 * 4096
SESSIONS = 5
PER_SESSION = 60


async def _admit(
    rt: object, sids: list[str], start: int, count: int, acks: dict[str, InputAdmitted]
) -> None:
    async def one_session(sid: str) -> None:
        for i in range(start, start + count):
            text = f"{sid} prompt {i} " + "words " * 30
            rec = await rt.sessions.prompt(sid, prompt=Prompt(text=text), resume=False)  # type: ignore[attr-defined]
            acks[rec.id] = rec

    async with trio.open_nursery() as nursery:
        for sid in sids:
            nursery.start_soon(one_session, sid)


async def _populate(data: Path, *, backup_midway: bool) -> tuple[dict[str, InputAdmitted], int]:
    """Admit prompts into SESSIONS sessions; return the receipts and the backup's lsn."""
    acks: dict[str, InputAdmitted] = {}
    backup_lsn = -1
    options = {"backup_every": 10**9}
    async with open_runtime(data_dir=data, store_options=options) as rt:
        loc = Location(directory=str(data))
        sids = [(await rt.sessions.create(location=loc)).id for _ in range(SESSIONS)]
        await _admit(rt, sids, 0, PER_SESSION // 2, acks)
        if backup_midway:
            backup_lsn = await rt.storage.read(Backup())
        await _admit(rt, sids, PER_SESSION // 2, PER_SESSION // 2, acks)
    assert len(acks) == SESSIONS * PER_SESSION
    return acks, backup_lsn


def _check(
    data: Path,
    acks: dict[str, InputAdmitted],
    contiguous: Callable[[EventStore], dict[str, int]],
) -> EventStore:
    store = EventStore.open(data)
    counts = contiguous(store)
    assert len(counts) == SESSIONS
    # every table reads back in full (a damaged block fails a full scan)
    for table in ("event", "session", "session_input", "session_message", "meta"):
        store.conn.execute(f"select * from {table}").fetchall()
    rows = Counter(r[0] for r in store.conn.execute("select id from session_input").fetchall())
    assert rows == Counter(acks.keys())
    admitted = Counter(
        r[0]
        for r in store.conn.execute(
            "select data->>'messageID' from event where type like 'session.next.prompt.admitted%'"
        ).fetchall()
    )
    assert admitted == rows
    for mid, rec in acks.items():
        assert store.input(mid) == rec
    return store


def _damage(path: Path, rng: random.Random, *, every_block: bool) -> int:
    """Overwrite 4 KiB runs of random bytes; return how many places were hit."""
    size = path.stat().st_size
    if every_block:
        # one run inside every storage block after the first
        places = [
            start + rng.randrange(0, BLOCK - 4096, 4096)
            for start in range(HEADERS + BLOCK, size - 4096, BLOCK)
        ]
    else:
        places = [rng.randrange(size // 4, 3 * size // 4, 4096) for _ in range(6)]
    with path.open("r+b") as f:
        for place in places:
            f.seek(place)
            f.write(rng.randbytes(4096))
    return len(places)


@pytest.fixture
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    """Journal segments of 8 KiB, so a backup really releases the segments it covers."""
    original = Journal.open.__func__  # type: ignore[attr-defined]

    def open_small(cls: type[Journal], directory: Path, **options: object) -> Journal:
        return original(cls, directory, **{**options, "segment_max_bytes": 8192})  # type: ignore[no-any-return]

    monkeypatch.setattr(Journal, "open", classmethod(open_small))


def _set_aside_files(data: Path) -> list[Path]:
    return list(data.glob(f"{DB_FILE}.corrupt-*"))


def _remove(data: Path) -> None:
    (data / DB_FILE).unlink()
    (data / f"{DB_FILE}.wal").unlink(missing_ok=True)


@pytest.mark.parametrize("seed", [1, 2])
async def test_random_blocks_overwritten_in_the_middle(
    tmp_path: Path, seed: int, contiguous: Callable[[EventStore], dict[str, int]]
) -> None:
    acks, _ = await _populate(tmp_path, backup_midway=False)
    assert _damage(tmp_path / DB_FILE, random.Random(seed), every_block=False) == 6
    _check(tmp_path, acks, contiguous).close()


async def test_every_data_block_damaged_is_detected_at_open(
    tmp_path: Path, contiguous: Callable[[EventStore], dict[str, int]]
) -> None:
    acks, _ = await _populate(tmp_path, backup_midway=False)
    assert _damage(tmp_path / DB_FILE, random.Random(7), every_block=True) >= 3
    store = _check(tmp_path, acks, contiguous)
    try:
        stats = store.statistics()
        assert stats.rebuilt
        assert stats.recovered_batches == stats.journal_lsn + 1
    finally:
        store.close()
    assert _set_aside_files(tmp_path)


async def test_deleted_database_is_rebuilt_from_the_journal(
    tmp_path: Path, contiguous: Callable[[EventStore], dict[str, int]]
) -> None:
    acks, _ = await _populate(tmp_path, backup_midway=False)
    _remove(tmp_path)
    store = _check(tmp_path, acks, contiguous)
    try:
        assert store.statistics().recovered_batches == store.journal_lsn() + 1
    finally:
        store.close()


@pytest.mark.usefixtures("small_segments")
@pytest.mark.parametrize("damage", ["deleted", "overwritten"])
async def test_backup_plus_journal_tail(
    tmp_path: Path, damage: str, contiguous: Callable[[EventStore], dict[str, int]]
) -> None:
    acks, backup_lsn = await _populate(tmp_path, backup_midway=True)
    assert backup_lsn > 0
    assert (tmp_path / f"{DB_FILE}.backup").exists()
    journal = Journal.open(tmp_path / "journal")
    try:
        # the journal alone no longer covers the start: recovery needs the backup
        assert 0 < journal.first_lsn <= backup_lsn + 1
    finally:
        journal.close()
    if damage == "deleted":
        _remove(tmp_path)
    else:
        _damage(tmp_path / DB_FILE, random.Random(3), every_block=True)
    store = _check(tmp_path, acks, contiguous)
    try:
        stats = store.statistics()
        assert stats.rebuilt
        # the backup supplied everything up to backup_lsn; only the tail was replayed
        assert stats.recovered_batches == stats.journal_lsn - backup_lsn
        assert 0 < stats.recovered_batches
    finally:
        store.close()


@pytest.mark.usefixtures("small_segments")
async def test_rebuilt_store_keeps_admission_idempotent(
    tmp_path: Path, contiguous: Callable[[EventStore], dict[str, int]]
) -> None:
    acks, _ = await _populate(tmp_path, backup_midway=True)
    _remove(tmp_path)
    # recover=False: waking the pending sessions would promote the rows under test
    async with open_runtime(data_dir=tmp_path, recover=False) as rt:
        for rec in list(acks.values())[::37]:
            again = await rt.sessions.prompt(
                rec.session_id, prompt=rec.prompt, id=rec.id, delivery=rec.delivery, resume=False
            )
            assert again == rec
        fresh = await rt.sessions.prompt(
            rec.session_id, prompt=Prompt(text="after recovery"), resume=False
        )
    acks[fresh.id] = fresh
    _check(tmp_path, acks, contiguous).close()
