"""A StorageActor whose store fails a commit is restarted and reopens from the journal."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import trio

from runtime import Location, Prompt, StorageError, llm, open_runtime
from storage import EventStore, JournalHeld, PendingInputs


async def test_a_failed_commit_restarts_the_storage_actor_and_loses_nothing_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = EventStore._append_journal
    failures: list[int] = []

    def flaky(self: EventStore, batch: Any, **options: Any) -> int:
        if len(failures) == 0 and any("fail me" in e.data.decode() for e in batch.events):
            failures.append(1)
            raise OSError("injected: disk full")
        return original(self, batch, **options)

    monkeypatch.setattr(EventStore, "_append_journal", flaky)
    async with open_runtime(data_dir=tmp_path / "data", llm=llm.ScriptedLLM([])) as rt:
        info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
        kept = await rt.sessions.prompt(info.id, prompt=Prompt(text="kept"), resume=False)
        with pytest.raises(StorageError):
            await rt.sessions.prompt(info.id, prompt=Prompt(text="fail me"), resume=False)
        after = await _admit_retrying(rt, info.id, "msg_after")
        pending = await rt.storage.read(PendingInputs(session_id=info.id))
        restarts = rt.storage.statistics().restarts
    assert failures == [1]
    assert restarts == 1
    assert [row.id for row in pending] == [kept.id, after.id]
    assert [row.admitted_seq for row in pending] == [1, 2]


async def _admit_retrying(rt: Any, session_id: str, message_id: str) -> Any:
    """Admit with a fixed id, retrying once if the store was restarting (an exact retry)."""
    try:
        return await rt.sessions.prompt(
            session_id, prompt=Prompt(text="after"), id=message_id, resume=False
        )
    except StorageError:
        return await rt.sessions.prompt(
            session_id, prompt=Prompt(text="after"), id=message_id, resume=False
        )


async def test_a_store_that_cannot_open_leaves_no_thread_behind(tmp_path: Path) -> None:
    # A data dir held by another runtime: every start of the storage actor fails, the root
    # gives up, and none of the store threads those starts made keeps running (they are not
    # daemons: one left behind would keep the process from exiting).
    def store_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if "_DuckThread" in t.name}

    def causes(exc: BaseException) -> list[BaseException]:
        found, stack = [], [exc]
        while stack:
            item = stack.pop()
            found.append(item)
            if isinstance(item, BaseExceptionGroup):
                stack.extend(item.exceptions)
            if item.__cause__ is not None:
                stack.append(item.__cause__)
        return found

    async with open_runtime(data_dir=tmp_path / "data", llm=llm.ScriptedLLM([])):
        before = store_threads()
        assert len(before) == 1
        with trio.fail_after(20), pytest.raises(BaseException) as caught:
            async with open_runtime(data_dir=tmp_path / "data", llm=llm.ScriptedLLM([])):
                pass
        assert any(isinstance(e, JournalHeld) for e in causes(caught.value))
        assert store_threads() == before
