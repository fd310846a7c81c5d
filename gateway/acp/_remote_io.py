"""Attached to a server, what the editor brings to a session, each over a websocket of the
server's ``/api/ws`` of its own (``docs/websocket.md``): its files and terminals as the
session's tool I/O (``tools.route``: each ``tools.io`` frame the server sends is done
through the editor, the ``ToolIO`` of ``_editor``, its answer sent back as
``tools.io.result``), and its MCP servers (``mcp.servers``: run by the server for as long
as the websocket lasts). The tools themselves run on the server, which stays
authoritative.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from runtime.mcp import McpServerSpec
from runtime.tools import CommandRun, ToolContext, ToolError, ToolIO

__all__ = ["remote_io", "remote_servers"]

_log = logging.getLogger("kittiwake.acp")
_ROUTE = "route"


class _Call(msgspec.Struct, frozen=True, kw_only=True):
    """A ``tools.io`` frame: what the server asks, for which tool call."""

    call_id: int = msgspec.field(name="callID")
    op: str
    session_id: str = msgspec.field(name="sessionID")
    tool_call_id: str = msgspec.field(name="toolCallID")
    message_id: str = msgspec.field(name="messageID")
    agent: str
    directory: str
    path: str = ""
    content: str = ""
    command: str = ""
    cwd: str = ""
    timeout: float = 0.0
    output_limit: int = msgspec.field(default=0, name="outputLimit")


class _Frame(msgspec.Struct, frozen=True):
    type: str = ""
    ref: Any = None
    call_id: Any = msgspec.field(default=None, name="callID")
    error: Any = None


class _Socket:
    def __init__(self, ws: WebSocketConnection, io: ToolIO) -> None:
        self._ws = ws
        self._io = io
        self._lock = trio.Lock()
        self._calls: dict[int, trio.CancelScope] = {}
        self.routed = trio.Event()
        self.refusal: str | None = None

    async def send(self, frame: dict[str, Any]) -> None:
        async with self._lock:
            await self._ws.send_message(msgspec.json.encode(frame).decode())

    async def serve(self, nursery: trio.Nursery) -> None:
        """Read the server's frames until the connection ends: each ``tools.io`` is done
        in a task of its own, a ``tools.io.cancel`` cancels its task."""
        try:
            while True:
                raw = await self._ws.get_message()
                try:
                    frame = msgspec.json.decode(raw, type=_Frame)
                except msgspec.DecodeError:
                    continue
                if frame.type == "reply" and frame.ref == _ROUTE:
                    self.refusal = None if frame.error is None else str(frame.error)
                    self.routed.set()
                elif frame.type == "reply" and frame.error is not None:
                    _log.warning("the server refused a tool I/O answer: %s", frame.error)
                elif frame.type == "tools.io":
                    nursery.start_soon(self._call, raw)
                elif frame.type == "tools.io.cancel" and frame.call_id in self._calls:
                    self._calls[frame.call_id].cancel()
        except ConnectionClosed:
            self.refusal = self.refusal or "the server closed the connection"
            self.routed.set()

    async def _call(self, raw: str | bytes) -> None:
        try:
            call = msgspec.json.decode(raw, type=_Call)
        except msgspec.ValidationError as exc:
            _log.warning("a tool I/O request the agent does not read: %s", exc)
            return
        answer: dict[str, Any] = {
            "type": "tools.io.result", "ref": f"io-{call.call_id}",
            "sessionID": call.session_id, "callID": call.call_id,
        }  # fmt: skip
        scope = self._calls[call.call_id] = trio.CancelScope()
        try:
            with scope:
                answer["result"] = await self._do(call)
        except ToolError as exc:
            answer["error"] = str(exc)
        except Exception as exc:
            _log.exception("the editor's tool I/O failed")
            answer["error"] = f"The editor's tool I/O failed: {exc!r}"
        finally:
            del self._calls[call.call_id]
        if scope.cancelled_caught:
            return  # the server no longer waits for it
        await self.send(answer)

    async def _do(self, call: _Call) -> Any:
        ctx = ToolContext(
            session_id=call.session_id, agent=call.agent, assistant_message_id=call.message_id,
            tool_call_id=call.tool_call_id, directory=call.directory,
        )  # fmt: skip
        io = self._io
        if call.op == "read_text" and io.read_text is not None:
            return await io.read_text(ctx, call.path)
        if call.op == "write_text" and io.write_text is not None:
            await io.write_text(ctx, call.path, call.content)
            return None
        if call.op == "run_command" and io.run_command is not None:
            run = CommandRun(
                command=call.command, cwd=call.cwd, timeout=call.timeout,
                output_limit=call.output_limit,
            )  # fmt: skip
            ran = await io.run_command(ctx, run)
            return {
                "output": ran.output, "exitCode": ran.exit_code, "signal": ran.signal,
                "truncated": ran.truncated, "timedOut": ran.timed_out,
            }  # fmt: skip
        raise ToolError(f"The editor does not offer {call.op}")


@asynccontextmanager
async def remote_io(
    url: str, headers: list[tuple[bytes, bytes]], session_id: str, io: ToolIO
) -> AsyncIterator[None]:
    """While in this block, the server at the websocket *url* routes *session_id*'s tool
    I/O to *io* (the editor's). A server that refuses (an older one, an unknown session)
    leaves the tools as they are: said in the log. Cancellation closes the websocket; the
    server then fails the calls still waiting for the editor."""
    async with open_websocket_url(url, extra_headers=headers) as ws:
        socket = _Socket(ws, io)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(socket.serve, nursery)
            await socket.send(
                {
                    "type": "tools.route", "ref": _ROUTE, "sessionID": session_id,
                    "read": io.read_text is not None, "write": io.write_text is not None,
                    "terminal": io.run_command is not None,
                }
            )  # fmt: skip
            await socket.routed.wait()
            if socket.refusal is not None:
                _log.warning("the server runs the tools without the editor: %s", socket.refusal)
            yield
            nursery.cancel_scope.cancel()


class _Held:
    """The editor's servers as the server runs them: they have settled once the server
    answered (it answers when each connected or failed)."""

    async def settled(self) -> None:
        await trio.lowlevel.checkpoint()


def _entry(spec: McpServerSpec) -> dict[str, Any]:
    """*spec* as an entry of ``mcp.servers``: OpenCode's ``mcp`` entry with its name."""
    if spec.type == "local":
        return {
            "name": spec.name, "type": "local", "command": spec.command,
            "environment": spec.environment, "cwd": spec.cwd,
        }  # fmt: skip
    return {
        "name": spec.name, "type": "remote", "url": spec.url, "headers": spec.headers,
        "transport": spec.transport,
    }  # fmt: skip


@asynccontextmanager
async def remote_servers(
    url: str, headers: list[tuple[bytes, bytes]], session_id: str,
    specs: Mapping[str, McpServerSpec],
) -> AsyncIterator[_Held]:  # fmt: skip
    """While in this block, the server at the websocket *url* runs *specs* as
    *session_id*'s own MCP servers; entered once they connected or failed. A server that
    refuses (an older one, a malformed entry) runs none: said in the log. Cancellation
    closes the websocket, and the server stops them."""
    async with open_websocket_url(url, extra_headers=headers) as ws:
        servers = [_entry(spec) for spec in specs.values()]
        ask = {"type": "mcp.servers", "ref": "servers", "sessionID": session_id, "servers": servers}
        await ws.send_message(msgspec.json.encode(ask).decode())
        while True:
            frame = msgspec.json.decode(await ws.get_message(), type=_Frame)
            if frame.type == "reply" and frame.ref == "servers":
                break
        if frame.error is not None:
            _log.warning("the server runs none of the editor's MCP servers: %s", frame.error)

        async def drain() -> None:
            try:
                while True:
                    await ws.get_message()
            except ConnectionClosed:
                return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            yield _Held()
            nursery.cancel_scope.cancel()
