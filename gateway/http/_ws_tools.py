"""What a ``/api/ws`` client brings to a session: its tool I/O (``tools.route``), for an
attached ``kittiwake acp`` whose editor's buffers and terminals the session's file and
shell tools then use, as they do in process (``runtime.tools.ToolIO``); and MCP servers of
the session's own (``mcp.servers``, read by :func:`session_servers`), the editor's.

The server stays authoritative: the tools run here (permission checks, path confinement,
before-images, the durable events); only reading or writing a file's text and running a
command are asked of the client, as ``tools.io`` frames it answers with
``tools.io.result``. A call the server stops waiting for (the tool call interrupted) is
``tools.io.cancel``; a call still waiting when the connection ends fails.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import trio

from gateway.http._wire import GatewayError
from runtime.config import McpServerConfig
from runtime.mcp import McpServerSpec, spec_of
from runtime.tools import CommandResult, CommandRun, ToolContext, ToolError, ToolIO

__all__ = ["SocketToolIO", "session_servers"]

Emit = Callable[[dict[str, Any]], Awaitable[None]]
"""Queues a frame for the client; raises ``ToolError`` when the client is gone."""


class _Ran(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    output: str
    exit_code: int | None = None
    signal: str | None = None
    truncated: bool = False
    timed_out: bool = False


class _Server(McpServerConfig, frozen=True, kw_only=True):
    """One server of ``mcp.servers``: OpenCode's ``mcp`` entry with its ``name`` and, for a
    remote one, its ``transport`` (``auto``, ``http`` or ``sse``)."""

    name: str
    transport: Literal["auto", "http", "sse"] = "auto"


def session_servers(servers: Any, directory: str) -> dict[str, McpServerSpec]:
    """The specs of the ``servers`` of an ``mcp.servers`` frame for a session working in
    *directory* (a remote one is not signed in to: a 401 fails it).

    Raises:
        GatewayError: ``InvalidRequestError`` for a malformed list or an entry missing
            what its type needs; nothing is started.
    """
    try:
        listed = msgspec.convert(servers, list[_Server])
    except msgspec.ValidationError as exc:
        raise GatewayError("InvalidRequestError", f"Invalid servers: {exc}") from None
    specs: dict[str, McpServerSpec] = {}
    for server in listed:
        spec = spec_of(server.name, server, directory)
        if spec.error is not None or spec.type is None:
            error = spec.error or f"mcp.{server.name}: needs a type, local or remote"
            raise GatewayError("InvalidRequestError", error)
        specs[spec.name] = msgspec.structs.replace(spec, oauth=False, transport=server.transport)
    return specs


@dataclass(slots=True)
class _Waiting:
    done: trio.Event = field(default_factory=trio.Event)
    result: Any = None
    error: str | None = None


class SocketToolIO:
    """The tool I/O of one websocket connection's client.

    Args:
        emit: queues a frame for the client.
        cancel: queues a frame if there is room (never waits): the ``tools.io.cancel``.
        timeout: seconds a file's read or write waits for the client's answer (a command
            waits its own timeout and this on top).
    """

    def __init__(
        self, emit: Emit, cancel: Callable[[dict[str, Any]], None], *, timeout: float
    ) -> None:
        self._emit = emit
        self._cancel = cancel
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._waiting: dict[int, _Waiting] = {}
        self._closed = False

    def io(self, *, read: bool, write: bool, terminal: bool) -> ToolIO:
        """The ``ToolIO`` of what the client offers."""
        return ToolIO(
            read_text=self._read if read else None,
            write_text=self._write if write else None,
            run_command=self._run if terminal else None,
        )  # fmt: skip

    async def _read(self, ctx: ToolContext, path: str) -> str:
        result = await self._call(ctx, "read_text", {"path": path}, self._timeout)
        if not isinstance(result, str):
            raise ToolError(f"The editor answered no text for {path}")
        return result

    async def _write(self, ctx: ToolContext, path: str, content: str) -> None:
        await self._call(ctx, "write_text", {"path": path, "content": content}, self._timeout)

    async def _run(self, ctx: ToolContext, run: CommandRun) -> CommandResult:
        fields = {
            "command": run.command, "cwd": run.cwd, "timeout": run.timeout,
            "outputLimit": run.output_limit,
        }  # fmt: skip
        result = await self._call(ctx, "run_command", fields, run.timeout + self._timeout)
        try:
            ran = msgspec.convert(result, _Ran)
        except msgspec.ValidationError as exc:
            raise ToolError(f"The editor's command result is malformed: {exc}") from None
        return CommandResult(
            output=ran.output, exit_code=ran.exit_code, signal=ran.signal,
            truncated=ran.truncated, timed_out=ran.timed_out,
        )  # fmt: skip

    async def _call(self, ctx: ToolContext, op: str, fields: dict[str, Any], wait: float) -> Any:
        """Ask the client for *op* and wait for its answer (*wait* seconds at most).

        Raises ``ToolError``: the client's refusal, no answer in time, or the connection
        gone. Cancellation tells the client (``tools.io.cancel``) and propagates."""
        if self._closed:
            raise ToolError("The editor's connection closed")
        call_id = next(self._ids)
        waiting = self._waiting[call_id] = _Waiting()
        try:
            await self._emit(
                {
                    "type": "tools.io", "callID": call_id, "op": op,
                    "sessionID": ctx.session_id, "toolCallID": ctx.tool_call_id,
                    "messageID": ctx.assistant_message_id, "agent": ctx.agent,
                    "directory": ctx.directory, **fields,
                }
            )  # fmt: skip
            with trio.move_on_after(wait):
                await waiting.done.wait()
        except trio.Cancelled:
            self._cancel({"type": "tools.io.cancel", "callID": call_id})
            raise
        finally:
            del self._waiting[call_id]
        if not waiting.done.is_set():
            self._cancel({"type": "tools.io.cancel", "callID": call_id})
            raise ToolError(f"The editor did not answer {op} within {wait:g} s")
        if waiting.error is not None:
            raise ToolError(waiting.error)
        return waiting.result

    def settle(self, call_id: Any, result: Any, error: str | None) -> bool:
        """Hand a waiting call the client's answer; False when none waits (a late one)."""
        waiting = self._waiting.get(call_id) if isinstance(call_id, int) else None
        if waiting is None or waiting.done.is_set():
            return False
        waiting.result, waiting.error = result, error
        waiting.done.set()
        return True

    def close(self) -> None:
        """The connection ended: every waiting call fails, and so does every later one."""
        self._closed = True
        for waiting in self._waiting.values():
            if not waiting.done.is_set():
                waiting.error = "The editor's connection closed"
                waiting.done.set()
