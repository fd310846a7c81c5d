"""Context Epochs inside the drain: baseline, chronological updates, blocking, restarts."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import trio.testing

from runtime import llm
from runtime.context import (
    UNAVAILABLE,
    SystemContext,
    SystemContextRegistry,
    Unavailable,
    date_source,
)
from storage import Events, PendingInputs
from tests.execution.conftest import answer, prompt, running


class Knobs:
    """Mutable values the test's Context Sources load."""

    def __init__(self) -> None:
        self.day = datetime.date(2026, 11, 26)
        self.mode = "fast"
        self.region = "eu"
        self.available = True


def _factory(knobs: Knobs) -> Any:
    def make(directory: str) -> SystemContextRegistry:
        registry = SystemContextRegistry()

        async def load_mode() -> str | Unavailable:
            return knobs.mode if knobs.available else UNAVAILABLE

        async def load_region() -> str | Unavailable:
            return knobs.region

        async def produce() -> list[SystemContext]:
            return [
                date_source(today=lambda: knobs.day),
                SystemContext.make(
                    "test/mode", str, load_mode, lambda v: f"Mode: {v}", lambda v: f"Mode is now: {v}"
                ),
                SystemContext.make(
                    "test/region", str, load_region, lambda v: f"Region: {v}",
                    lambda v: f"Region is now: {v}",
                ),
            ]  # fmt: skip

        registry.contribute("core/builtins", produce)
        return registry

    return make


def _systems(request: llm.LLMRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, llm.SystemMessage)]


async def test_the_first_request_carries_the_baseline_and_no_update(tmp_path: Path) -> None:
    knobs = Knobs()
    client = llm.ScriptedLLM([answer(), answer()])
    async with running(tmp_path, client, context=_factory(knobs)) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
    first, second = client.requests
    baseline = first.system[-1]
    assert "Today's date: Thu Nov 26 2026" in baseline and "Mode: fast" in baseline
    assert _systems(first) == [] and _systems(second) == []
    assert second.system == first.system


async def test_a_date_rollover_admits_one_message_with_only_the_new_date(tmp_path: Path) -> None:
    knobs = Knobs()
    client = llm.ScriptedLLM([answer(), answer()])
    async with running(tmp_path, client, context=_factory(knobs)) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        knobs.day = datetime.date(2026, 11, 27)
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
    assert _systems(client.requests[1]) == ["Today's date is now: Fri Nov 27 2026"]
    assert client.requests[1].system == client.requests[0].system
    last = client.requests[1].messages
    assert isinstance(last[-1], llm.SystemMessage)  # after the newly promoted input


async def test_two_sources_changing_at_one_boundary_give_one_message_kept_across_restart(
    tmp_path: Path,
) -> None:
    knobs = Knobs()
    failing = [llm.StepStart(), llm.ProviderError(kind="retryable", message="overloaded")]
    client = llm.ScriptedLLM([answer(), failing])
    async with running(tmp_path, client, context=_factory(knobs)) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        knobs.mode, knobs.region = "slow", "us"
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
        baseline = client.requests[0].system[-1]
    updates = _systems(client.requests[1])
    assert (
        len(updates) == 1
        and "Mode is now: slow" in updates[0]
        and "Region is now: us" in updates[0]
    )

    retry = llm.ScriptedLLM([answer("after restart")])
    async with running(tmp_path, retry, context=_factory(knobs)) as rt:
        sessions = await rt.sessions.list(limit=10)
        sid = sessions.data[-1].id
        await rt.sessions.resume(sid)
        events = await rt.storage.read(Events(session_id=sid, after=-1, limit=1000))
    assert _systems(retry.requests[0]) == updates
    assert retry.requests[0].system[-1] == baseline
    kinds = [e.type for e in events]
    assert kinds.count("session.next.context.updated") == 1


async def test_unavailable_initial_context_leaves_the_prompt_pending_until_resume(
    tmp_path: Path,
) -> None:
    knobs = Knobs()
    knobs.available = False
    client = llm.ScriptedLLM([answer()])
    async with running(tmp_path, client, context=_factory(knobs)) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("waiting"))
        await rt.sessions.wait_idle(sid)
        assert client.requests == []
        pending = await rt.storage.read(PendingInputs(session_id=sid))
        assert [row.prompt.text for row in pending] == ["waiting"]
        knobs.available = True
        await rt.sessions.resume(sid)
        assert len(client.requests) == 1
        assert "Mode: fast" in client.requests[0].system[-1]


async def test_agents_md_edits_arrive_as_one_superseding_message(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([answer(), answer(), answer()])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        work = tmp_path / "work"
        (work / ".git").mkdir()
        agents = work / "AGENTS.md"
        agents.write_text("Use tabs.")
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        agents.write_text("Use spaces.")
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
        agents.unlink()
        await rt.sessions.prompt(sid, prompt=prompt("three"))
        await rt.sessions.wait_idle(sid)
    assert "Use tabs." in client.requests[0].system[-1]
    update = _systems(client.requests[1])
    assert len(update) == 1 and update[0].startswith("These instructions replace")
    assert "Use spaces." in update[0]
    assert _systems(client.requests[2])[-1] == "Previously loaded instructions no longer apply."


async def test_source_changes_never_wake_an_idle_session(tmp_path: Path) -> None:
    knobs = Knobs()
    client = llm.ScriptedLLM([answer()])
    async with running(tmp_path, client, context=_factory(knobs)) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        knobs.mode = "changed"
        # a reaction to the change would be a task made runnable by it, and a drain it
        # started would be waited for
        await trio.testing.wait_all_tasks_blocked()
        await rt.sessions.wait_idle(sid)
        events = await rt.storage.read(Events(session_id=sid, after=-1, limit=1000))
    assert len(client.requests) == 1
    assert not any(e.type.startswith("session.next.context.updated") for e in events)
