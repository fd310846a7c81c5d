"""A StorageActor whose store fails a commit is restarted and reopens from the journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import Location, Prompt, StorageError, llm, open_runtime
from storage import EventStore


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
        pending = await rt.storage.read(lambda s: s.pending_inputs(info.id))
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
