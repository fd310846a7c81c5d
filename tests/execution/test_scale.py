"""Many sessions drain concurrently, not one after another."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import trio
import trio.testing

from runtime import Location, Prompt, llm, open_runtime
from tests.execution.conftest import answer

SESSIONS = 1000


class AllAtOnceLLM:
    """Holds every provider turn until *expected* turns are in flight together, then
    answers them all: a drain that ran sessions one after another never opens it."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.in_flight = 0
        self.peak = 0
        self.all_in = trio.Event()
        self.requests: list[llm.LLMRequest] = []

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.LLMEvent]:
        self.requests.append(request)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        if self.in_flight == self.expected:
            self.all_in.set()
        try:
            await self.all_in.wait()
        finally:
            self.in_flight -= 1
        for event in answer("ok"):
            await trio.lowlevel.checkpoint()
            yield event


async def test_a_thousand_sessions_have_their_provider_turns_in_flight_at_once(
    tmp_path: Path,
) -> None:
    client = AllAtOnceLLM(SESSIONS)
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        location = Location(directory=str(tmp_path))
        ids = [(await rt.sessions.create(location=location)).id for _ in range(SESSIONS)]
        with trio.fail_after(60):  # serially the first turn would wait for the others forever
            async with trio.open_nursery() as nursery:
                for sid in ids:
                    nursery.start_soon(_prompt_and_wait, rt, sid)
    assert len(client.requests) == SESSIONS
    assert client.peak == SESSIONS


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
