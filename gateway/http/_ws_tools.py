"""A session's tool I/O served by a ``/api/ws`` client (``tools.route``): an attached
``kittiwake acp`` whose editor's buffers and terminals the session's file and shell tools
then use, as they do in process (``runtime.tools.ToolIO``).

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
from typing import Any

import msgspec
import trio

from runtime.tools import CommandResult, CommandRun, ToolContext, ToolError, ToolIO

__all__ = ["SocketToolIO"]

Emit = Callable[[dict[str, Any]], Awaitable[None]]
"""Queues a frame for the client; raises ``ToolError`` when the client is gone."""


class _Ran(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    output: str
    exit_code: int | None = None
    signal: str | None = None
    truncated: bool = False
    timed_out: bool = False


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
