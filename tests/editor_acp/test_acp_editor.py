"""The editor's files and terminals: when the client advertises ``fs`` and ``terminal``, the
session's read, write and edit go through ``fs/*`` (its buffers) and the shell tool runs in
``terminal/*``, shown in the tool call; without them, everything stays local."""

from __future__ import annotations

import asyncio
import json

import pytest
from acp import schema as S
from acp import text_block

from tests.opencode.harness import Provider, calls, said

from .harness import Editor, Setup, agent, stderr_of

EDITOR = S.ClientCapabilities(
    fs=S.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


def tool_results(body: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("attached", [False, True], ids=["in-process", "attached"])
def test_file_tools_use_the_editors_buffers_and_shell_its_terminal(
    tmp_path, provider: Provider, attached: bool
) -> None:
    from .test_acp_attached import served

    setup = Setup(tmp_path, provider)
    notes = setup.project / "notes.txt"
    notes.write_text("on disk\n")
    edit = {"filePath": "notes.txt", "oldString": "unsaved", "newString": "edited"}
    write = {"filePath": "new.txt", "content": "made in the editor\n"}
    provider.server.queue(
        calls("read", {"filePath": "notes.txt"}, call_id="call_read"),
        calls("edit", edit, call_id="call_edit"),
        calls("write", write, call_id="call_write"),
        calls("shell", {"command": "echo from-terminal; pwd; exit 3"}, call_id="call_sh"),
        calls("shell", {"command": "sleep 30", "timeout": 500}, call_id="call_slow"),
        said("Done."),
    )
    editor = Editor()
    editor.buffers[str(notes)] = "unsaved line\n"

    async def scenario(*args: str) -> None:
        async with agent(setup, editor, *args) as acp:
            await acp.conn.initialize(protocol_version=1, client_capabilities=EDITOR)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("work")])
            assert done.stop_reason == "end_turn"
            assert acp.checker.problems == [] and acp.stray == []
            for method in ("fs/read_text_file", "fs/write_text_file", "terminal/create"):
                assert method in acp.checker.methods

    if attached:  # the server runs the tools; the editor's files and terminals serve them
        with served(setup) as url:
            asyncio.run(scenario("--attach", url))
    else:
        asyncio.run(scenario())
    assert notes.read_text() == "on disk\n" and not (setup.project / "new.txt").exists()
    assert editor.buffers[str(notes)] == "edited line\n"
    assert editor.buffers[str(setup.project / "new.txt")] == "made in the editor\n"
    results = tool_results(provider.server.requests[-1].json())
    read, edited, wrote, ran, slow = results
    assert "1: unsaved line" in read["output"]
    assert "+edited line" in edited["structured"]["diff"]
    assert wrote["structured"]["created"] is True
    assert ran["output"] == f"from-terminal\n{setup.project}\n[exit code 3]"
    assert ran["structured"]["exit_code"] == 3
    assert slow["structured"]["timed_out"] is True
    assert "timed out after 0.5 s" in slow["output"]
    assert editor.terminal_calls[:4] == [
        f"create bash -c echo from-terminal; pwd; exit 3 in {setup.project}",
        "wait term-1", "output term-1", "release term-1",
    ]  # fmt: skip
    assert editor.terminal_calls[4:] == [
        f"create bash -c sleep 30 in {setup.project}", "wait term-2", "kill term-2",
        "output term-2", "release term-2",
    ]  # fmt: skip
    shown = [
        u for u in editor.updates if getattr(u[1], "tool_call_id", None) == "call_sh"
    ]  # the call shows the editor's terminal
    terminals = [c.terminal_id for _, u in shown for c in (u.content or []) if c.type == "terminal"]
    assert terminals and set(terminals) == {"term-1"}


def test_without_the_capabilities_the_tools_stay_local(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    notes = setup.project / "notes.txt"
    notes.write_text("on disk\n")
    provider.server.queue(
        calls("read", {"filePath": "notes.txt"}),
        calls("shell", {"command": "echo local"}, call_id="call_sh"),
        said("Done."),
    )
    editor = Editor()
    editor.buffers[str(notes)] = "unsaved line\n"

    async def scenario() -> None:
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            await acp.conn.prompt(session_id=sid, prompt=[text_block("work")])
            assert acp.checker.problems == [] and acp.stray == []
        assert acp.process.returncode == 0, stderr_of(setup)

    asyncio.run(scenario())
    read, ran = tool_results(provider.server.requests[-1].json())
    assert "1: on disk" in read["output"] and "local" in ran["output"]
    assert editor.reads == [] and editor.terminal_calls == []
