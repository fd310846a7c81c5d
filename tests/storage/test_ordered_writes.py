"""Writes answered before their fdatasync: ordered, visible, and published only once durable."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from runtime import events as ev
from runtime import open_runtime
from storage import (
    AdmitPrompt,
    CreateSession,
    EventStore,
    GetSession,
    Journal,
    JournalFiles,
    PromoteInputs,
)


def _info(session_id: str) -> ev.SessionInfo:
    return ev.SessionInfo(
        id=session_id, project_id="p", location=ev.Location(directory="/a"), title="t",
        time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip


def test_an_unsynced_append_is_synced_by_the_next_sync_or_rotation(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path, segment_max_bytes=200)
    try:
        journal.append([b"a" * 50], sync=False)
        assert journal.statistics().fsyncs == 0
        journal.sync()
        journal.sync()  # nothing left to sync
        assert journal.statistics().fsyncs == 1
        journal.append([b"b" * 150], sync=False)
        journal.append([b"c" * 150], sync=False)  # rotates: the closing segment is synced first
        assert journal.statistics().fsyncs == 2
        journal.append([b"d"])
        assert journal.statistics().fsyncs == 3
        assert [p for _, p in journal.read()] == [b"a" * 50, b"b" * 150, b"c" * 150, b"d"]
    finally:
        journal.close()


async def test_a_non_durable_write_is_answered_while_its_fdatasync_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, syncing, armed = threading.Event(), threading.Event(), threading.Event()

    class HeldFiles(JournalFiles):
        @staticmethod
        def fdatasync(fd: int) -> None:
            if armed.is_set():
                syncing.set()
                gate.wait(10)
            os.fdatasync(fd)

    options = {"journal_files": HeldFiles()}
    async with open_runtime(data_dir=tmp_path, llm=None, store_options=options) as rt:
        armed.set()
        with rt.hub.subscribe(None) as sub:
            created = await rt.storage.write(CreateSession(info=_info("ses_a")), durable=False)
            assert created[1] is True
            assert await trio.to_thread.run_sync(syncing.wait, 10)  # its fdatasync is held
            with pytest.raises(trio.WouldBlock):
                sub.receive_nowait()  # nothing is published before it is durable
            durable_done = trio.Event()
            journaled = threading.Event()
            answer = EventStore.answer
            probe = GetSession(session_id="ses_a")

            def answered(store: EventStore, query: Any) -> Any:
                if query is probe:  # the later write's query: its batch is planned
                    journaled.set()
                return answer(store, query)

            monkeypatch.setattr(EventStore, "answer", answered)

            async def durable() -> None:
                # Planned after the first write (which it sees), answered after its own sync.
                again, _ = await rt.storage.write(CreateSession(info=_info("ses_a")), then=probe)
                assert again[1] is False
                durable_done.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(durable)
                assert await trio.to_thread.run_sync(journaled.wait, 10)  # only its sync is left
                await trio.testing.wait_all_tasks_blocked()
                assert not durable_done.is_set()  # queued behind the held fdatasync
                with pytest.raises(trio.WouldBlock):
                    sub.receive_nowait()
                gate.set()
            item = await sub.receive()
            assert item.aggregate_id == "ses_a"


def test_a_history_first_read_between_write_and_sync_sees_the_batch(tmp_path: Path) -> None:
    """Reading an uncached history while a batch is written but not yet applied neither
    waits for the applier (it cannot have the batch yet) nor misses the batch."""
    from runtime import Prompt
    from storage import EventStore

    def admit(store: EventStore, n: int) -> None:
        op = AdmitPrompt(
            session_id="ses_a", message_id=f"msg_{n}", prompt=Prompt(text=f"p{n}"),
            delivery="queue", timestamp=n, fresh=True,
        )  # fmt: skip
        store.write_batch([op])

    promote = PromoteInputs(session_id="ses_a", opening=True, timestamp=5)

    store = EventStore.open(tmp_path)
    store.write_batch([CreateSession(info=_info("ses_a"))])
    admit(store, 0)
    store.write_batch([promote])
    admit(store, 1)
    store.close()
    store = EventStore.open(tmp_path)  # no history cached
    try:
        seen: list[list[str]] = []

        def on_written(outcomes: Any) -> None:
            delta = store.history_delta("ses_a", -1, -1)
            seen.append([message.id for _, message in delta.entries])

        store.write_batch([promote], on_written=on_written)
        assert seen == [["msg_0", "msg_1"]]
        assert [m.id for _, m in store.history("ses_a")] == ["msg_0", "msg_1"]
    finally:
        store.close()
