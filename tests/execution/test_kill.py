"""A runtime process SIGKILLed mid-turn loses nothing and recovers on restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import trio

from runtime import AssistantMessage, llm
from runtime import _messages as m
from tests.execution.conftest import answer, running, user_texts

_CHILD = Path(__file__).with_name("kill_child.py")


def _run_child_until_queued(data: Path, work: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    child = subprocess.Popen(
        [sys.executable, str(_CHILD), str(data), str(work)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    lines = []
    for line in child.stdout:
        lines.append(line.split()[0])
        if lines[-1] == "QUEUED":
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    child.stdout.close()
    assert lines == ["TOOL", "QUEUED"], lines


async def test_sigkill_mid_turn_then_restart_recovers_without_loss(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    await trio.to_thread.run_sync(_run_child_until_queued, tmp_path / "data", tmp_path / "work")

    client = llm.ScriptedLLM([answer("recovered")])
    async with running(tmp_path, client) as rt:
        sid = "ses_kill"
        with trio.fail_after(10):
            while not client.requests:  # noqa: ASYNC110 - the restart wakes the session itself
                await trio.sleep(0.01)
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
    stored = await rt.storage.read(lambda s: s.events(sid, after=0, limit=10_000))
    from actors._sessions import _decoded

    for item in stored:
        yield _decoded(item)
