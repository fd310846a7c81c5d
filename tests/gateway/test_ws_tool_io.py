"""What a ``/api/ws`` client brings to a session: its tool I/O (``tools.route``: the
server runs the tools and asks the client to read, write and run, ``tools.io``, the client
answers, ``tools.io.result``; a client that goes away fails the call waiting for it), and
MCP servers of the session's own (``mcp.servers``, stopped when the client goes); bad
frames are refused."""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from runtime.agents import BUILD
from runtime.llm import ScriptedLLM, ToolMessage
from tests.mcp_client.conftest import SERVER
from tests.waiting import eventually

from .conftest import answer, served
from .test_session_tools_http import S, _session, call


async def _frame(ws: WebSocketConnection, kind: str, ref: Any = None) -> dict[str, Any]:
    """The next frame of *kind* (a reply: to *ref*), those before it skipped."""
    with trio.fail_after(20):
        while True:
            frame = json.loads(await ws.get_message())
            if frame.get("type") == kind and (kind != "reply" or frame.get("ref") == ref):
                return frame


async def _ask(ws: WebSocketConnection, frame: dict[str, Any]) -> dict[str, Any]:
    await ws.send_message(json.dumps(frame))
    return await _frame(ws, "reply", frame["ref"])


def _results(llm: ScriptedLLM) -> list[tuple[str, bool]]:
    found = [m for m in llm.requests[-1].messages if isinstance(m, ToolMessage)]
    return [("".join(p.text for p in m.content[-1].content), m.content[-1].is_error) for m in found]


async def test_the_client_reads_and_runs_for_the_session_and_its_leaving_fails_the_call(
    tmp_path: Any,
) -> None:
    llm = ScriptedLLM(
        [
            call("c1", "read", {"filePath": "notes.txt"}),
            call("c2", "shell", {"command": "echo on the server"}),
            answer("done"),
            call("c3", "read", {"filePath": "notes.txt"}),
            answer("gone"),
        ]
    )
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _session(client, tmp_path)
        notes = tmp_path / "work" / "notes.txt"
        notes.write_text("on disk\n")
        url = g.url.replace("http://", "ws://") + "/api/ws"
        async with open_websocket_url(url) as ws:
            route = {"type": "tools.route", "sessionID": sid, "read": True, "terminal": True}
            bad = await _ask(ws, {**route, "ref": 1, "read": "yes"})
            assert bad["error"]["_tag"] == "InvalidRequestError"
            unknown = await _ask(ws, {**route, "ref": 2, "sessionID": "ses_0000000000000000000000"})
            assert unknown["error"]["_tag"] == "SessionNotFoundError"
            late = {"type": "tools.io.result", "ref": 3, "sessionID": sid, "callID": 99}
            assert (await _ask(ws, late))["error"]["_tag"] == "InvalidRequestError"
            assert (await _ask(ws, {**route, "ref": 4})) == {
                "type": "reply",
                "ref": 4,
                "data": None,
            }
            r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "go"}})
            assert r.status_code == 200, r.text
            read = await _frame(ws, "tools.io")
            assert (read["op"], read["path"], read["toolCallID"]) == ("read_text", str(notes), "c1")
            result = {"type": "tools.io.result", "sessionID": sid, "callID": read["callID"]}
            await _ask(ws, {**result, "ref": 5, "result": "in the editor\n"})
            run = await _frame(ws, "tools.io")
            assert (run["op"], run["command"], run["cwd"]) == (
                "run_command", "echo on the server", str(tmp_path / "work"),
            )  # fmt: skip
            ran = {"output": "ran in the editor\n", "exitCode": 0}
            await _ask(ws, {**result, "ref": 6, "callID": run["callID"], "result": ran})
            assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
            (read_text, read_failed), (shell_text, shell_failed) = _results(llm)
            assert "1: in the editor" in read_text and not read_failed
            assert "ran in the editor" in shell_text and not shell_failed
            r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "again"}})
            assert (await _frame(ws, "tools.io"))["toolCallID"] == "c3"
        # the client left while the server waited for it: the call fails, the turn goes on
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        text, failed = _results(llm)[-1]
        assert failed and "The editor's connection closed" in text
        assert notes.read_text() == "on disk\n"


async def test_the_client_brings_mcp_servers_for_the_session_while_it_stays(
    tmp_path: Any,
) -> None:
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _session(client, tmp_path)
        other = await _session(client, tmp_path)
        location = await g.rt.execution.location(str(tmp_path / "work"))
        url = g.url.replace("http://", "ws://") + "/api/ws"
        local = {
            "name": "editor",
            "type": "local",
            "command": [sys.executable, str(SERVER), "stdio"],
        }
        ask = {"type": "mcp.servers", "sessionID": sid}
        async with open_websocket_url(url) as ws:
            bad = await _ask(ws, {**ask, "ref": 1, "servers": "editor"})
            assert bad["error"]["_tag"] == "InvalidRequestError"
            commandless = await _ask(
                ws, {**ask, "ref": 2, "servers": [{"name": "x", "type": "local"}]}
            )
            assert commandless["error"]["message"] == "mcp.x: a local server needs a command"
            gone = await _ask(ws, {**ask, "ref": 3, "sessionID": "ses_0000000000000000000000"})
            assert gone["error"]["_tag"] == "SessionNotFoundError"
            ran = await _ask(ws, {**ask, "ref": 4, "servers": [local]})
            assert ran["data"] == {"editor": {"status": "connected"}}
            assert "editor_add" in [d.name for d in location.tools_for(BUILD, [], sid)]
            assert "editor_add" not in [d.name for d in location.tools_for(BUILD, [], other)]
        await eventually(lambda: sid not in location.session_mcp)  # stopped with the socket
        assert "editor_add" not in [d.name for d in location.tools_for(BUILD, [], sid)]
