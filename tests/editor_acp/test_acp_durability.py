"""Sessions outlive the agent process: ``kill -9`` mid-answer, a new ``kittiwake acp``,
``session/load`` replays the history and a new prompt continues it; ``session/cancel``
interrupts a prompt (``cancelled``) and leaves the history valid."""

from __future__ import annotations

import asyncio
import contextlib
import json

from acp import text_block
from acp.exceptions import RequestError

from tests.llm.conftest import Reply
from tests.llm.streams import sse
from tests.opencode.harness import Provider, calls, said

from .harness import Editor, Setup, agent, stderr_of


def hangs_after(text: str) -> Reply:
    """A step that streams *text*, then holds the response open until the client leaves."""
    head = {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1750000000,
        "model": "m1",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                     "finish_reason": None}],
    }  # fmt: skip
    return Reply(chunks=[sse(head)], hang=True)


def user_texts(body: dict) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "user"]


def test_a_killed_agent_leaves_a_session_a_new_one_loads_and_continues(
    tmp_path, provider: Provider
) -> None:
    setup = Setup(tmp_path, provider)
    provider.server.queue(hangs_after("Once upon "), said("The ", "end."))

    async def first() -> str:
        editor = Editor()
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            prompt = asyncio.create_task(
                acp.conn.prompt(session_id=sid, prompt=[text_block("tell me a story")])
            )
            await editor.until(lambda: editor.text() == "Once upon ")
            acp.process.kill()  # SIGKILL, mid-answer
            await acp.process.wait()
            with contextlib.suppress(RequestError, ConnectionError):
                await prompt
            assert acp.checker.problems == [] and acp.stray == []
            return sid

    async def second(sid: str) -> Editor:
        editor = Editor()
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            loaded = await acp.conn.load_session(
                session_id=sid, cwd=str(setup.project), mcp_servers=[]
            )
            assert loaded.modes is not None and loaded.modes.current_mode_id == "build"
            replayed = list(editor.updates)
            assert editor.text("user_message_chunk") == "tell me a story"
            assert all(s == sid for s, _ in replayed)
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("go on")])
            assert done.stop_reason == "end_turn"
            assert acp.checker.problems == [] and acp.stray == []
        assert acp.process.returncode == 0, stderr_of(setup)
        return editor

    sid = asyncio.run(first())
    editor = asyncio.run(second(sid))
    assert editor.text() == "The end."
    # The provider sees the story's beginning: the history survived the crash.
    assert user_texts(provider.server.requests[-1].json())[-2:] == ["tell me a story", "go on"]


def test_cancel_interrupts_a_prompt_and_the_history_stays_valid(
    tmp_path, provider: Provider
) -> None:
    setup = Setup(tmp_path, provider)
    provider.server.queue(hangs_after("Counting: one, "), said("Fine."))

    async def scenario() -> None:
        editor = Editor()
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            prompt = asyncio.create_task(
                acp.conn.prompt(session_id=sid, prompt=[text_block("count to a million")])
            )
            await editor.until(lambda: editor.text() == "Counting: one, ")
            await acp.conn.cancel(session_id=sid)
            assert (await prompt).stop_reason == "cancelled"
            again = await acp.conn.prompt(session_id=sid, prompt=[text_block("stop then")])
            assert again.stop_reason == "end_turn"
            assert editor.text() == "Counting: one, Fine."
            assert acp.checker.problems == [] and acp.stray == []

    asyncio.run(scenario())
    messages = provider.server.requests[-1].json()["messages"]
    said_before = [m["content"] for m in messages if m["role"] == "assistant"]
    assert said_before == ["Counting: one, "]
    assert user_texts({"messages": messages}) == ["count to a million", "stop then"]


def test_cancel_during_a_permission_request_rejects_it(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    (setup.project / "kittiwake.json").write_text(json.dumps({"permission": {"edit": "ask"}}))
    notes = setup.project / "notes.txt"
    notes.write_text("v1\n")
    edit = {"filePath": "notes.txt", "oldString": "v1", "newString": "v2"}
    provider.server.queue(calls("edit", edit))

    async def scenario() -> None:
        editor = Editor(permission=None)  # answers "cancelled", as a client does on cancel
        editor.hold_permission = asyncio.Event()
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            prompt = asyncio.create_task(
                acp.conn.prompt(session_id=sid, prompt=[text_block("edit the notes")])
            )
            await editor.until(lambda: bool(editor.permissions))
            await acp.conn.cancel(session_id=sid)
            editor.hold_permission.set()
            assert (await prompt).stop_reason == "cancelled"
            [call] = editor.of("tool_call")
            last = [u for u in editor.of("tool_call_update") if u.tool_call_id == call.tool_call_id]
            assert last[-1].status == "failed"
            assert acp.checker.problems == [] and acp.stray == []

    asyncio.run(scenario())
    assert notes.read_text() == "v1\n"
