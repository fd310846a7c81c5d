"""A store whose commit failed answers reads that need the database with an error at once;
the runtime publishes what such a batch left in the store once it restarts."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from runtime import Location, StorageError, llm, open_runtime
from runtime import events as ev
from storage import (
    DB_FILE,
    AllEvents,
    CreateSession,
    Events,
    EventStore,
    JournalCorrupt,
    JournalFiles,
    StoredEvent,
)


class _FailingSync(JournalFiles):
    def __init__(self) -> None:
        self.fail = False

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        if self.fail:
            raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)


def _info(session_id: str) -> ev.SessionInfo:
    return ev.SessionInfo(
        id=session_id, project_id="p", location=ev.Location(directory="/a"), title="t",
        time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip


@pytest.mark.timeout(30)
def test_a_read_after_a_failed_fdatasync_fails_instead_of_waiting_forever(tmp_path: Path) -> None:
    files = _FailingSync()
    store = EventStore.open(tmp_path, journal_files=files)
    try:
        outcomes, _ = store.write_batch([CreateSession(info=_info("ses_a"))])
        assert outcomes[0].error is None
        files.fail = True
        outcomes, _ = store.write_batch([CreateSession(info=_info("ses_b"))])
        assert isinstance(outcomes[0].error, StorageError)
        # The failed batch never reaches the applier: the read barrier used to wait for it.
        with pytest.raises(StorageError, match="must be reopened"):
            store.answer(AllEvents())
    finally:
        files.fail = False
        store.close()
    reopened = EventStore.open(tmp_path)
    try:
        ids = {e.aggregate_id for e in reopened.answer(AllEvents())}
        assert "ses_a" in ids  # ses_b's batch may or may not have reached the file
    finally:
        reopened.close()


class _OneFailedSync(JournalFiles):
    """Armed, the next fdatasync fails; with *drop*, the kernel dropped the unsynced
    pages too (the file is cut back to what the last fdatasync covered)."""

    def __init__(self) -> None:
        self.armed = False
        self.drop = False
        self.written: dict[int, int] = {}  # by inode: where the records written end
        self.synced: dict[int, int] = {}  # ... and the synced ones

    def pwrite(self, fd: int, data: Any, offset: int) -> int:  # type: ignore[override]
        written = os.pwrite(fd, data, offset)
        if len(data) and bytes(data[:1]) != b"\x00":  # a record, not preallocation
            inode = os.fstat(fd).st_ino
            self.written[inode] = max(self.written.get(inode, 0), offset + written)
        return written

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        inode = os.fstat(fd).st_ino
        if self.armed:
            self.armed = False
            if self.drop:
                os.ftruncate(fd, self.synced.get(inode, 0))
            raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)
        self.synced[inode] = self.written.get(inode, 0)


@pytest.mark.parametrize("drop", [False, True], ids=["pages kept", "pages dropped"])
@pytest.mark.parametrize("mode", ["threaded", "inline"])
async def test_a_subscriber_sees_no_seq_gap_after_a_batch_reported_failed(
    tmp_path: Path, drop: bool, mode: str
) -> None:
    files = _OneFailedSync()
    work = tmp_path / "work"
    work.mkdir()
    async with open_runtime(
        data_dir=tmp_path / "data", llm=llm.ScriptedLLM([]), storage_mode=mode,
        store_options={"journal_files": files},
    ) as rt:  # fmt: skip
        sid = (await rt.sessions.create(location=Location(directory=str(work)))).id
        with rt.hub.subscribe(sid) as sub:
            files.armed, files.drop = True, drop
            with pytest.raises(StorageError):
                await rt.sessions.switch_agent(sid, "plan")
            for attempt in range(3):  # a read queued before the failure was noted fails too
                try:
                    with trio.fail_after(10):
                        await rt.sessions.switch_agent(sid, "build")  # waits for the restart
                    break
                except StorageError:
                    assert attempt < 2
            assert rt.storage.statistics().restarts == 1
            stored = await rt.storage.read(Events(session_id=sid, after=0, limit=10))
            seen = []
            while len(seen) < len(stored):
                with trio.fail_after(10):
                    item = await sub.receive()
                if isinstance(item, StoredEvent):
                    seen.append(item)
            assert [(e.seq, e.id) for e in seen] == [(e.seq, e.id) for e in stored]
            assert [e.seq for e in seen] == list(range(1, len(stored) + 1))
            # Pages kept: the failed switch is in the store and was published; dropped: not.
            assert len(stored) == (1 if drop else 2)
            with pytest.raises(trio.WouldBlock):
                sub.receive_nowait()


def test_a_store_that_fails_to_open_releases_the_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = EventStore.open(data, journal_segment_bytes=300)
    store.close()
    behind = (data / DB_FILE).read_bytes()  # a database that trails the journal
    store = EventStore.open(data, journal_segment_bytes=300)
    try:
        for index in range(4):
            outcomes, _ = store.write_batch([CreateSession(info=_info(f"ses_{index}"))])
            assert outcomes[0].error is None
    finally:
        store.close()
    (data / DB_FILE).write_bytes(behind)
    for name in os.listdir(data):
        if name != DB_FILE and name.startswith(DB_FILE):
            os.remove(data / name)
    first = sorted((data / "journal").glob("journal-*.seg"))[0]
    damaged = bytearray(first.read_bytes())
    damaged[30] ^= 0x40  # inside the first record's payload: catching up fails
    first.write_bytes(bytes(damaged))
    for _ in range(2):  # the second try finds the journal, not a leftover lock
        with pytest.raises(JournalCorrupt):
            EventStore.open(data, journal_segment_bytes=300)
    EventStore.check_free(data)


def test_a_tail_caught_up_after_a_failed_fdatasync_survives_a_later_one(tmp_path: Path) -> None:
    files = _OneFailedSync()
    store = EventStore.open(tmp_path, journal_files=files)
    try:
        assert store.write_batch([CreateSession(info=_info("ses_a"))])[0][0].error is None
        files.armed = True  # the pages stay in the file
        assert store.write_batch([CreateSession(info=_info("ses_b"))])[0][0].error is not None
    finally:
        store.close()
    # Reopened in the same process: the database catches up from the kept batch. Then an
    # fdatasync fails and the kernel drops what it had not written: ses_b must not be
    # among that, or the database would hold a batch the journal lost (it never opened).
    store = EventStore.open(tmp_path, journal_files=files)
    try:
        files.armed, files.drop = True, True
        assert store.write_batch([CreateSession(info=_info("ses_c"))])[0][0].error is not None
    finally:
        store.close()
    reopened = EventStore.open(tmp_path, journal_files=files)
    try:
        ids = [e.aggregate_id for e in reopened.answer(AllEvents())]
        assert ids == ["ses_a", "ses_b"]
    finally:
        reopened.close()
