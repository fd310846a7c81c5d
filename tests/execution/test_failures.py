"""Every way a drain fails ends durably and visibly: a ``step.failed`` in history and on the
event stream, the session's ``last_error``, and the session actor's statistics. An
interrupt is not a failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from msgspec import UNSET

from runtime import AssistantMessage, Location, llm, open_runtime
from runtime import events as ev
from runtime.tools import ToolEnvironment, ToolRegistry
from runtime.tools.testing import TestingGates, testing_tools
from tests.execution.conftest import GatedLLM, answer, prompt, running, tool_calls
from tests.provider_rules import assert_accepted


async def _failures(rt: Any, sid: str) -> list[ev.StepFailed]:
    page, _ = await rt.sessions.history(sid)
    return [e.event for e in page if isinstance(e.event, ev.StepFailed)]


def _assistants(context: list[Any]) -> list[AssistantMessage]:
    return [x for x in context if isinstance(x, AssistantMessage)]


async def test_the_turn_cap_ends_in_a_durable_visible_failure(tmp_path: Path) -> None:
    def always_tools(request: llm.LLMRequest) -> list[llm.LLMEvent]:
        return tool_calls((f"c{len(request.messages)}", "echo", {"text": "x"}))

    client = llm.ScriptedLLM(always_tools)
    async with running(tmp_path, client, max_turns=3) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("loop"))
        await rt.sessions.wait_idle(sid)
        assert len(client.requests) == 3
        failures = await _failures(rt, sid)
        assert [f.error.message for f in failures] == ["Work remained after 3 provider turns"]
        last = _assistants(await rt.sessions.context(sid))[-1]
        assert failures[0].assistant_message_id == last.id
        assert last.error is not UNSET and "3 provider turns" in last.error.message
        info = await rt.sessions.get(sid)
        assert info.last_error == ev.RunError(
            tag="StepLimitExceededError", message="Work remained after 3 provider turns"
        )
        (actor,) = rt.execution.active_sessions()
        assert "3 provider turns" in (actor.statistics().last_error or "")
        assert sid not in await rt.sessions.needs_resume()  # failed, not cut short

    # durable: another process sees the same failure
    again = llm.ScriptedLLM([answer("again")])
    async with running(tmp_path, again) as rt:
        info = await rt.sessions.get(sid)
        assert info.last_error is not UNSET and info.last_error.tag == "StepLimitExceededError"
        # a new provider turn clears it
        await rt.sessions.prompt(sid, prompt=prompt("stop now"))
        await rt.sessions.wait_idle(sid)
        assert (await rt.sessions.get(sid)).last_error is UNSET
        assert_accepted(again.requests[0], await rt.sessions.context(sid))


async def test_an_agent_step_limit_fails_the_same_way(tmp_path: Path) -> None:
    from runtime.agents import AgentInfo

    def always_tools(request: llm.LLMRequest) -> list[llm.LLMEvent]:
        return tool_calls((f"c{len(request.messages)}", "echo", {"text": "x"}))

    agents = {"build": AgentInfo(name="build", steps=2, builtin=True)}
    client = llm.ScriptedLLM(always_tools)
    async with running(tmp_path, client, agents=agents) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("loop"))
        await rt.sessions.wait_idle(sid)
        assert len(client.requests) == 2
        info = await rt.sessions.get(sid)
        assert info.last_error is not UNSET
        assert info.last_error.message == "Work remained after 2 provider turns"
        assert len(await _failures(rt, sid)) == 1


async def test_a_provider_error_sets_last_error_with_its_tag(tmp_path: Path) -> None:
    overflow = [llm.StepStart(), llm.ProviderError(kind="context_overflow", message="too long")]
    client = llm.ScriptedLLM([overflow, [llm.ProviderError(kind="terminal", message="nope")]])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("big"))
        await rt.sessions.wait_idle(sid)
        info = await rt.sessions.get(sid)
        assert info.last_error == ev.RunError(tag="ContextOverflowError", message="too long")
        assert [f.error.message for f in await _failures(rt, sid)] == ["too long"]
        (actor,) = rt.execution.active_sessions()
        assert actor.statistics().last_error == "ContextOverflowError: too long"
        await rt.sessions.prompt(sid, prompt=prompt("again"))
        await rt.sessions.wait_idle(sid)
        info = await rt.sessions.get(sid)
        assert info.last_error == ev.RunError(tag="ProviderError", message="nope")
        assert len(await _failures(rt, sid)) == 2


class _BrokenRegistry(ToolRegistry):
    def definitions(self, agent: Any, session_id: str | None = None) -> Any:
        raise RuntimeError("the registry broke")


async def test_an_internal_error_outside_a_turn_fails_a_step_of_its_own(tmp_path: Path) -> None:
    def tools(env: ToolEnvironment) -> ToolRegistry:
        registry = _BrokenRegistry(env)
        registry.contribute(testing_tools(TestingGates()))
        return registry

    client = llm.ScriptedLLM([answer()])
    async with open_runtime(data_dir=tmp_path / "data", llm=client, tools=tools) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
        await rt.sessions.prompt(sid, prompt=prompt("hi"))
        await rt.sessions.wait_idle(sid)
        assert client.requests == []
        info = await rt.sessions.get(sid)
        assert info.last_error == ev.RunError(
            tag="InternalError", message="RuntimeError: the registry broke"
        )
        (failed,) = _assistants(await rt.sessions.context(sid))
        assert failed.content == [] and failed.error is not UNSET
        assert isinstance(failed.time.completed, int)
        assert sid not in await rt.sessions.needs_resume()


async def test_an_interrupt_is_not_a_failure(tmp_path: Path) -> None:
    client = GatedLLM([answer("slow")], holds={0: "turn"})
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        with trio.fail_after(5):
            await client.in_stream.wait()
            await rt.sessions.interrupt(sid)
        info = await rt.sessions.get(sid)
        assert info.last_error is UNSET and info.needs_resume is UNSET
        assert await _failures(rt, sid) == []
        assert _assistants(await rt.sessions.context(sid))[-1].finish == "interrupted"
        (actor,) = rt.execution.active_sessions()
        assert actor.statistics().last_error is None
