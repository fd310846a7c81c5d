"""A runtime process SIGKILLed mid-turn loses nothing and recovers on restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import trio
from msgspec import UNSET

from runtime import AssistantMessage, Prompt, ResumeNotNeededError, llm
from runtime import messages as m
from storage import Events
from tests.execution.conftest import (
    answer,
    cut_tool_and_step,
    eventually,
    roles,
    run_child_until_cut,
    running,
    user_texts,
)
from tests.provider_rules import assert_accepted


async def test_sigkill_mid_turn_then_restart_recovers_without_loss(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    await trio.to_thread.run_sync(run_child_until_cut, tmp_path / "data", tmp_path / "work")

    client = llm.ScriptedLLM([answer("recovered")])
    async with running(tmp_path, client) as rt:
        sid = "ses_kill"
        await eventually(lambda: bool(client.requests))  # the restart wakes the session itself
        with trio.fail_after(10):
            await rt.sessions.wait_idle(sid)
        assert user_texts(client.requests[0]) == ["work", "pending"]
        context = await rt.sessions.context(sid)
        tools = [
            part
            for x in context
            if isinstance(x, AssistantMessage)
            for part in x.content
            if isinstance(part, m.AssistantTool)
        ]
        assert len(tools) == 1 and isinstance(tools[0].state, m.ToolError)
        assert tools[0].state.error.message == "Tool execution interrupted"
        cut_tool_and_step(context)
        assert_accepted(client.requests[0], context)
        assert roles(client.requests[0]) == [
            "UserMessage", "AssistantMessage", "ToolMessage", "UserMessage",
        ]  # fmt: skip
        assert sid not in await rt.sessions.needs_resume()  # the queued prompt continued it
        events = [e async for e in _replay(rt, sid)]
        promoted = [
            e.event.message_id
            for e in events
            if e.event.__struct_config__.tag.endswith("prompt.promoted")
        ]
        assert sorted(promoted) == ["msg_pending", "msg_work"]
        seqs = [e.seq for e in events]
        assert seqs == list(range(1, len(seqs) + 1))


async def _replay(rt, sid):  # type: ignore[no-untyped-def]
    stored = await rt.storage.read(Events(session_id=sid, after=0, limit=10_000))
    from actors import SessionEvent
    from runtime import events as ev

    for item in stored:
        yield SessionEvent(seq=item.seq, id=item.id, event=ev.decode_event(item.data))


def _run_context_child_until_updated(data: Path, work: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    child_script = Path(__file__).with_name("context_child.py")
    child = subprocess.Popen(
        [sys.executable, str(child_script), str(data), str(work)],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert child.stdout is not None
    first = child.stdout.readline().split()
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    child.stdout.close()
    assert first == ["UPDATED"], first


async def test_a_crash_after_a_context_update_replays_the_same_message(tmp_path: Path) -> None:
    from tests.execution.context_sources import file_context

    work = tmp_path / "work"
    work.mkdir()
    await trio.to_thread.run_sync(_run_context_child_until_updated, tmp_path / "data", work)

    client = llm.ScriptedLLM([answer("after the crash")])
    context = file_context(str(work))
    async with running(tmp_path, client, context=context) as rt:
        sid = "ses_ctx"
        assert sid in await rt.sessions.needs_resume()
        await rt.sessions.resume(sid)
        stored = await rt.storage.read(Events(session_id=sid, after=-1, limit=1000))
    updates = [e for e in stored if e.type == "session.next.context.updated"]
    assert len(updates) == 1
    systems = [m.text for m in client.requests[0].messages if isinstance(m, llm.SystemMessage)]
    assert systems == ["mode is now: slow\n\nregion is now: us"]
    assert client.requests[0].system[-1] == "mode: unset\n\nregion: unset"


async def test_sigkill_mid_tool_then_a_new_prompt_sends_an_accepted_request(
    tmp_path: Path,
) -> None:
    (tmp_path / "work").mkdir()
    await trio.to_thread.run_sync(
        partial(run_child_until_cut, tmp_path / "data", tmp_path / "work", queue=False)
    )
    client = llm.ScriptedLLM([answer("after the crash")])
    async with running(tmp_path, client) as rt:
        sid = "ses_kill"
        assert await rt.sessions.needs_resume() == [sid]
        cut = cut_tool_and_step(await rt.sessions.context(sid))
        assert client.requests == []  # a crash-cut turn is never retried by itself
        await rt.sessions.prompt(sid, prompt=Prompt(text="next"))
        await rt.sessions.wait_idle(sid)
        context = await rt.sessions.context(sid)
        assert_accepted(client.requests[0], context)
        assert user_texts(client.requests[0]) == ["work", "next"]
        assert cut_tool_and_step(context) == cut  # closed once, unchanged since
        assert (await rt.sessions.get(sid)).needs_resume is UNSET
        assert await rt.sessions.needs_resume() == []


async def test_a_crash_cut_session_waits_for_a_resume_across_restarts(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    await trio.to_thread.run_sync(
        partial(run_child_until_cut, tmp_path / "data", tmp_path / "work", queue=False)
    )
    sid = "ses_kill"
    idle = llm.ScriptedLLM([])
    async with running(tmp_path, idle) as rt:
        assert (await rt.sessions.get(sid)).needs_resume is True
        first = [e.event for e in [x async for x in _replay(rt, sid)]]
    async with running(tmp_path, idle) as rt:  # a second restart recovers nothing again
        assert [e.event for e in [x async for x in _replay(rt, sid)]] == first
        assert await rt.sessions.needs_resume() == [sid]
    tags = [e.__struct_config__.tag for e in first]
    assert tags[-3:] == [
        "session.next.tool.failed", "session.next.step.ended", "session.resume.needed",
    ]  # fmt: skip
    assert idle.requests == []

    client = llm.ScriptedLLM([answer("resumed")])
    async with running(tmp_path, client) as rt:
        with pytest.raises(ResumeNotNeededError):
            await rt.sessions.resume(rt.test_session, if_needed=True)
        await rt.sessions.resume(sid, if_needed=True)
        context = await rt.sessions.context(sid)
        assert_accepted(client.requests[0], context)
        assert roles(client.requests[0]) == ["UserMessage", "AssistantMessage", "ToolMessage"]
        assert (await rt.sessions.get(sid)).needs_resume is UNSET
        with pytest.raises(ResumeNotNeededError):
            await rt.sessions.resume(sid, if_needed=True)
        final = [x for x in context if isinstance(x, AssistantMessage)][-1]
        assert final.finish == "stop" and isinstance(final.time.completed, int)
