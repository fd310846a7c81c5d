"""Many sessions drain concurrently, not one after another."""

from __future__ import annotations

import time
from pathlib import Path

import trio
import trio.testing

from runtime import Location, Prompt, llm, open_runtime
from tests.execution.conftest import answer

SESSIONS = 1000
LATENCY = 0.05


async def test_a_thousand_sessions_finish_close_to_the_latency_bound(tmp_path: Path) -> None:
    client = llm.ScriptedLLM(lambda request: answer("ok"), latency=LATENCY)
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        location = Location(directory=str(tmp_path))
        ids = [(await rt.sessions.create(location=location)).id for _ in range(SESSIONS)]
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for sid in ids:
                nursery.start_soon(_prompt_and_wait, rt, sid)
        elapsed = time.perf_counter() - started
    assert len(client.requests) == SESSIONS
    # Serially this is SESSIONS * LATENCY = 50 s; concurrently a few latency bounds.
    assert elapsed < 10, f"{SESSIONS} sessions took {elapsed:.2f} s"


async def _prompt_and_wait(rt: object, sid: str) -> None:
    sessions = rt.sessions  # type: ignore[attr-defined]
    await sessions.prompt(sid, prompt=Prompt(text="hi"))
    await sessions.wait_idle(sid)


async def test_idle_sessions_beyond_the_active_limit_passivate_and_reactivate(
    tmp_path: Path,
) -> None:
    client = llm.ScriptedLLM(lambda request: answer("ok"))
    async with open_runtime(data_dir=tmp_path / "data", llm=client, max_active=5) as rt:
        location = Location(directory=str(tmp_path))
        ids = [(await rt.sessions.create(location=location)).id for _ in range(20)]
        for sid in ids:
            await _prompt_and_wait(rt, sid)
        await trio.testing.wait_all_tasks_blocked()
        assert len(rt.execution.active_sessions()) <= 6
        await _prompt_and_wait(rt, ids[0])  # passivated long ago: activates from storage
        context = await rt.sessions.context(ids[0])
    assert len(client.requests) == 21
    assert [type(m).__name__ for m in context] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
