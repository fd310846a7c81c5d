"""The editor's MCP servers: those passed in ``session/new`` (stdio and SSE, the project's
FastMCP test server) are tools of that session and of no other, and stop with it (its
``session/close``, the agent's end), leaving no process behind."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from acp import schema as S
from acp import text_block

from gateway.acp import RpcError
from gateway.acp._mcp import editor_servers
from tests.mcp_client.conftest import SERVER, free_port
from tests.opencode.harness import Provider, calls, said

from .harness import WAIT, Editor, Setup, agent, stderr_of


async def _exited(pid: int) -> None:
    """Return once process *pid* has ended (its pidfd turns readable: no polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    ended = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(fd, ended.set)
    try:
        async with asyncio.timeout(WAIT):
            await ended.wait()
    finally:
        loop.remove_reader(fd)
        os.close(fd)


@contextlib.asynccontextmanager
async def sse_server() -> AsyncIterator[str]:
    """The test server over SSE on 127.0.0.1, in a subprocess; its URL once it listens."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SERVER), "sse", str(port), stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stderr is not None
    stderr = process.stderr

    async def drain() -> None:  # its request log, read so that the pipe never fills
        while await stderr.read(65536):
            pass

    try:
        async with asyncio.timeout(WAIT):
            seen = b""
            while b"Uvicorn running" not in seen:
                line = await stderr.readline()
                assert line, "the SSE server ended before it listened"
                seen = line
        draining = asyncio.create_task(drain())
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        process.kill()
        await process.wait()
    await draining


def started(record: Path) -> list[int]:
    """The pids of the stdio servers started so far, in order."""
    if not record.exists():
        return []
    events = [json.loads(line) for line in record.read_text().splitlines()]
    return [e["pid"] for e in events if e["event"] == "start"]


def tool_names(body: dict) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools", [])}


def test_the_editors_servers_are_that_sessions_tools_and_stop_with_it(
    tmp_path, provider: Provider
) -> None:
    setup = Setup(tmp_path, provider)
    record = tmp_path / "record.jsonl"
    stdio = S.McpServerStdio(
        name="editor", command=sys.executable, args=[str(SERVER), "stdio"],
        env=[S.EnvVariable(name="MCP_RECORD", value=str(record))],
    )  # fmt: skip
    provider.server.queue(
        calls("editor_add", {"a": 2, "b": 3}, call_id="call_add"),
        calls("remote_shout", {"text": "hi"}, call_id="call_shout"),
        said("Done."),
        said("Other."),
        said("Again."),
    )
    editor = Editor()

    async def scenario() -> None:
        async with sse_server() as url, agent(setup, editor) as acp:
            init = await acp.conn.initialize(protocol_version=1)
            mcp = init.agent_capabilities.mcp_capabilities
            assert mcp.http and mcp.sse
            remote = S.SseMcpServer(type="sse", name="remote", url=url, headers=[])
            cwd = str(setup.project)
            first = (await acp.conn.new_session(cwd=cwd, mcp_servers=[stdio, remote])).session_id
            other = (await acp.conn.new_session(cwd=cwd, mcp_servers=[])).session_id
            done = await acp.conn.prompt(session_id=first, prompt=[text_block("add")])
            assert done.stop_reason == "end_turn"
            await acp.conn.prompt(session_id=other, prompt=[text_block("other")])
            [pid] = started(record)
            guard = os.getpgid(pid)
            await acp.conn.close_session(session_id=first)
            await _exited(pid)  # the server and its guard end with the session
            await _exited(guard)
            await acp.conn.load_session(cwd=cwd, session_id=first, mcp_servers=[stdio])
            await acp.conn.prompt(session_id=first, prompt=[text_block("again")])
            assert acp.checker.problems == [] and acp.stray == []
        assert acp.process.returncode == 0, stderr_of(setup)
        second = started(record)[-1]
        assert second != pid
        await _exited(second)  # the agent's end takes it down too

    asyncio.run(scenario())
    bodies = [r.json() for r in provider.server.requests]
    first_turn, _, last_turn, other_turn, again_turn = bodies
    assert {"editor_add", "remote_shout"} <= tool_names(first_turn)
    results = [m["content"] for m in last_turn["messages"] if m["role"] == "tool"]
    assert results == ["5", "HI"]
    assert not any(n.startswith(("editor_", "remote_")) for n in tool_names(other_turn))
    assert "editor_add" in tool_names(again_turn)  # loaded with the stdio server alone
    assert not any(n.startswith("remote_") for n in tool_names(again_turn))
    shown = [u for _, u in editor.updates if getattr(u, "tool_call_id", None) == "call_add"]
    assert shown[-1].status == "completed"


def test_the_editors_server_entries_are_read_as_acp_describes_them(tmp_path: Path) -> None:
    directory = str(tmp_path)
    specs = editor_servers(
        [
            {"name": "a", "command": "/bin/srv", "args": ["-v"], "env": [{"name": "K", "value": "1"}]},
            {"type": "http", "name": "b", "url": "https://h/mcp", "headers": [{"name": "X", "value": "y"}]},
            {"type": "sse", "name": "c", "url": "http://h/sse", "headers": []},
        ],
        directory,
    )  # fmt: skip
    assert specs["a"].type == "local" and specs["a"].command == ["/bin/srv", "-v"]
    assert specs["a"].environment == {"K": "1"} and specs["a"].cwd == directory
    assert (specs["b"].transport, specs["b"].headers, specs["b"].oauth) == (
        "http",
        {"X": "y"},
        False,
    )
    assert specs["c"].transport == "sse" and specs["c"].url == "http://h/sse"
    for bad in (
        {"type": "acp", "name": "d", "id": "x"},
        {"name": "e"},
        {"type": "http", "name": "f", "url": "ftp://h", "headers": []},
        "not an object",
    ):
        with pytest.raises(RpcError) as caught:
            editor_servers([bad], directory)
        assert caught.value.code == -32602 and "mcpServers[0]" in caught.value.message


def test_attached_the_server_runs_the_editors_servers_for_that_session(
    tmp_path, provider: Provider
) -> None:
    from .test_acp_attached import served

    setup = Setup(tmp_path, provider)
    record = tmp_path / "record.jsonl"
    stdio = S.McpServerStdio(
        name="editor", command=sys.executable, args=[str(SERVER), "stdio"],
        env=[S.EnvVariable(name="MCP_RECORD", value=str(record))],
    )  # fmt: skip
    provider.server.queue(
        calls("editor_add", {"a": 4, "b": 5}, call_id="call_add"), said("Nine."), said("Other.")
    )
    editor = Editor()

    async def scenario(url: str) -> None:
        async with agent(setup, editor, "--attach", url) as acp:
            await acp.conn.initialize(protocol_version=1)
            cwd = str(setup.project)
            first = (await acp.conn.new_session(cwd=cwd, mcp_servers=[stdio])).session_id
            other = (await acp.conn.new_session(cwd=cwd, mcp_servers=[])).session_id
            await acp.conn.prompt(session_id=first, prompt=[text_block("add")])
            await acp.conn.prompt(session_id=other, prompt=[text_block("other")])
            assert acp.checker.problems == [] and acp.stray == []
        assert acp.process.returncode == 0, stderr_of(setup)
        [pid] = started(record)
        await _exited(pid)  # the agent gone, the server stops the session's servers

    with served(setup) as url:
        asyncio.run(scenario(url))
    first_turn, last_turn, other_turn = [r.json() for r in provider.server.requests]
    assert "editor_add" in tool_names(first_turn)
    assert [m["content"] for m in last_turn["messages"] if m["role"] == "tool"] == ["9"]
    assert not any(n.startswith("editor_") for n in tool_names(other_turn))
