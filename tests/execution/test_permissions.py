"""Permission requests through the drain: durable, answered by clients, pinned to the turn's agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from runtime import Location, Prompt, PromptConflictError, StorageError, llm, open_runtime
from runtime.agents import BUILTIN_AGENTS, AgentInfo, PermissionRule
from runtime.agents._agent import compose_rules
from tests.execution.conftest import OneFailedSync, answer, published, tool_calls

CAREFUL = AgentInfo(
    name="careful", permission=compose_rules((), (PermissionRule(permission="bash", action="ask"),))
)
AGENTS = {**BUILTIN_AGENTS, "careful": CAREFUL}


def _tool_text(request: llm.LLMRequest) -> str:
    results = [m for m in request.messages if isinstance(m, llm.ToolMessage)]
    part = results[-1].content[0]
    return "".join(p.text for p in part.content if isinstance(p, llm.TextPart))


async def _session(rt: object, tmp_path: Path) -> str:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    location = Location(directory=str(work))
    info = await rt.sessions.create(location=location, agent="careful")  # type: ignore[attr-defined]
    return info.id  # type: ignore[no-any-return]


async def _prompt_until_asked(rt: Any, sid: str) -> None:
    """Prompt *sid* and wait until its tool call's permission request is stored."""
    with rt.hub.subscribe(sid) as sub:
        await rt.sessions.prompt(sid, prompt=Prompt(text="run it"))
        await published(sub, "permission.v2.asked")


async def test_ask_waits_durably_and_always_is_saved_for_the_project(tmp_path: Path) -> None:
    shell = ("c1", "shell", {"command": "echo approved"})
    client = llm.ScriptedLLM(
        [
            tool_calls(shell),
            answer(),
            tool_calls(("c2", "shell", {"command": "echo approved"})),
            answer(),
        ]
    )
    async with open_runtime(data_dir=tmp_path / "data", llm=client, agents=AGENTS) as rt:
        sid = await _session(rt, tmp_path)
        await _prompt_until_asked(rt, sid)
        pending = await rt.sessions.permissions(sid)
        assert [(p.tool, p.permission, p.status, p.agent) for p in pending] == [
            ("shell", "bash", "pending", "careful")
        ]
        await rt.sessions.reply_permission(sid, pending[0].id, "always")
        await rt.sessions.wait_idle(sid)
        assert "approved" in _tool_text(client.requests[1])
        with pytest.raises(PromptConflictError):
            await rt.sessions.reply_permission(sid, pending[0].id, "once")

        await rt.sessions.prompt(sid, prompt=Prompt(text="again"))
        await rt.sessions.wait_idle(sid)
        assert "approved" in _tool_text(client.requests[3])
        assert len(await rt.sessions.permissions(sid)) == 1  # the saved approval answered


async def test_an_agent_switch_while_asking_keeps_the_issuing_turns_policy(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([tool_calls(("c1", "shell", {"command": "echo ran"})), answer()])
    async with open_runtime(data_dir=tmp_path / "data", llm=client, agents=AGENTS) as rt:
        sid = await _session(rt, tmp_path)
        await _prompt_until_asked(rt, sid)
        await rt.sessions.switch_agent(sid, "plan")  # plan denies bash outright
        request = (await rt.sessions.permissions(sid))[0]
        await rt.sessions.reply_permission(sid, request.id, "once")
        await rt.sessions.wait_idle(sid)
        assert "ran" in _tool_text(client.requests[1])


async def test_reject_fails_the_call_and_the_model_sees_it(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([tool_calls(("c1", "shell", {"command": "echo no"})), answer()])
    async with open_runtime(data_dir=tmp_path / "data", llm=client, agents=AGENTS) as rt:
        sid = await _session(rt, tmp_path)
        await _prompt_until_asked(rt, sid)
        request = (await rt.sessions.permissions(sid))[0]
        await rt.sessions.reply_permission(sid, request.id, "reject")
        await rt.sessions.wait_idle(sid)
        result = [m for m in client.requests[1].messages if isinstance(m, llm.ToolMessage)][-1]
        assert result.content[0].is_error


async def test_the_plan_agent_is_denied_edits_and_shell_without_asking(tmp_path: Path) -> None:
    calls = [
        ("c1", "write", {"filePath": "a.txt", "content": "x"}),
        ("c2", "shell", {"command": "echo hi"}),
    ]
    client = llm.ScriptedLLM([tool_calls(*calls), answer()])
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        work = tmp_path / "work"
        work.mkdir()
        info = await rt.sessions.create(location=Location(directory=str(work)), agent="plan")
        await rt.sessions.prompt(info.id, prompt=Prompt(text="try"))
        await rt.sessions.wait_idle(info.id)
        assert await rt.sessions.permissions(info.id) == []
        results = [m for m in client.requests[1].messages if isinstance(m, llm.ToolMessage)][-1]
        assert all(part.is_error for part in results.content)
        assert not (work / "a.txt").exists()


@pytest.mark.parametrize("reply", ["once", "reject"])
async def test_a_reply_reported_failed_but_stored_reaches_the_waiting_call(
    tmp_path: Path, reply: str
) -> None:
    files = OneFailedSync()
    client = llm.ScriptedLLM([tool_calls(("c1", "shell", {"command": "echo ran"})), answer()])
    options: dict[str, Any] = {"journal_files": files}
    async with open_runtime(
        data_dir=tmp_path / "data", llm=client, agents=AGENTS, store_options=options
    ) as rt:
        sid = await _session(rt, tmp_path)
        await _prompt_until_asked(rt, sid)
        request = (await rt.sessions.permissions(sid))[0]
        files.armed = True
        with pytest.raises(StorageError):
            await rt.sessions.reply_permission(sid, request.id, reply)  # type: ignore[arg-type]
        # The store restarts and replays the reply; the waiting call hears of it.
        with trio.fail_after(10):
            await rt.sessions.wait_idle(sid)
        assert rt.storage.statistics().restarts == 1
        assert (await rt.sessions.permissions(sid))[0].status == reply
        with pytest.raises(PromptConflictError):
            await rt.sessions.reply_permission(sid, request.id, "once")
        result = [m for m in client.requests[1].messages if isinstance(m, llm.ToolMessage)][-1]
        assert result.content[0].is_error is (reply == "reject")
        if reply == "once":
            assert "ran" in _tool_text(client.requests[1])
