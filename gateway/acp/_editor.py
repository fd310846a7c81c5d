"""The editor's files and terminals as a session's tool I/O (``runtime.tools.ToolIO``).

When the client advertises ``fs.readTextFile`` / ``fs.writeTextFile``, the session's file
tools read and write through ``fs/read_text_file`` / ``fs/write_text_file`` (the editor's
buffers, unsaved changes included); when it advertises ``terminal``, the shell tool runs
``bash -c COMMAND`` in ``terminal/create``, shown in the tool call as that terminal, and
waits with ``terminal/wait_for_exit`` (killed at its timeout), reads ``terminal/output``,
then ``terminal/release``s it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

import msgspec
import trio

from gateway.acp._rpc import Connection, RpcError
from gateway.acp._wire import (
    ClientCapabilities,
    CreateTerminalParams,
    ReadTextFileParams,
    TerminalParams,
    WriteTextFileParams,
)
from runtime.tools import CommandResult, CommandRun, ToolContext, ToolError, ToolIO

__all__ = ["Editor"]

_log = logging.getLogger("kittiwake.acp")
_CLEANUP: Final = 10.0
"""Seconds a terminal's kill and release may take once its command is done or abandoned."""


class _Content(msgspec.Struct, frozen=True):
    content: str


class _Terminal(msgspec.Struct, frozen=True, rename="camel"):
    terminal_id: str


class _Exit(msgspec.Struct, frozen=True, rename="camel"):
    exit_code: int | None = None
    signal: str | None = None


class _Output(msgspec.Struct, frozen=True, rename="camel"):
    output: str
    truncated: bool = False
    exit_status: _Exit | None = None


TerminalShown = Callable[[str, str, str], Awaitable[None]]
"""Told ``(session id, tool call id, terminal id)`` once a command's terminal exists."""


class Editor:
    """The client's files and terminals, as far as it advertised them.

    *shown* is told each terminal created for a tool call, so the call shows it.
    """

    def __init__(
        self, conn: Connection, capabilities: ClientCapabilities, shown: TerminalShown
    ) -> None:
        self._conn = conn
        self._caps = capabilities
        self._shown = shown

    @property
    def forms(self) -> bool:
        """Whether the client renders elicitation forms (``elicitation.form``)."""
        modes = self._caps.elicitation
        return modes is not None and modes.get("form") is not None

    def tool_io(self) -> ToolIO | None:
        """The session tool I/O the client offers; ``None`` when it offers none."""
        fs = self._caps.fs
        io = ToolIO(
            read_text=self.read_text if fs.read_text_file else None,
            write_text=self.write_text if fs.write_text_file else None,
            run_command=self.run_command if self._caps.terminal else None,
        )  # fmt: skip
        if io.read_text is None and io.write_text is None and io.run_command is None:
            return None
        return io

    async def read_text(self, ctx: ToolContext, path: str) -> str:
        """The editor's text of *path*. Raises ``ToolError`` with the editor's refusal."""
        params = ReadTextFileParams(session_id=ctx.session_id, path=path)
        try:
            read = await self._conn.request("fs/read_text_file", params, _Content)
        except RpcError as exc:
            raise ToolError(f"The editor could not read {path}: {exc.message}") from None
        return read.content

    async def write_text(self, ctx: ToolContext, path: str, content: str) -> None:
        """Have the editor write *path*. Raises ``ToolError`` with the editor's refusal."""
        params = WriteTextFileParams(session_id=ctx.session_id, path=path, content=content)
        try:
            await self._conn.request("fs/write_text_file", params, object)
        except RpcError as exc:
            raise ToolError(f"The editor could not write {path}: {exc.message}") from None

    async def run_command(self, ctx: ToolContext, run: CommandRun) -> CommandResult:
        """Run *run* in a terminal of the editor's; its output as the terminal kept it.

        The command is killed at its timeout. Cancellation kills it too; either way the
        terminal is released (bounded, shielded). Raises ``ToolError`` when the editor
        refuses to create the terminal.
        """
        session = ctx.session_id
        create = CreateTerminalParams(
            session_id=session, command="bash", args=["-c", run.command], cwd=run.cwd,
            output_byte_limit=run.output_limit,
        )  # fmt: skip
        try:
            terminal = await self._conn.request("terminal/create", create, _Terminal)
        except RpcError as exc:
            raise ToolError(f"The editor could not start a terminal: {exc.message}") from None
        which = TerminalParams(session_id=session, terminal_id=terminal.terminal_id)
        finished = False
        try:
            await self._shown(session, ctx.tool_call_id, terminal.terminal_id)
            with trio.move_on_after(run.timeout) as timer:
                exit = await self._conn.request("terminal/wait_for_exit", which, _Exit)
            if timer.cancelled_caught:
                await self._conn.request("terminal/kill", which, object)
            output = await self._conn.request("terminal/output", which, _Output)
            finished = True
        except RpcError as exc:
            raise ToolError(f"The editor's terminal failed: {exc.message}") from None
        finally:
            with trio.move_on_after(_CLEANUP, shield=True):
                await self._release(which, kill=not finished)
        status = output.exit_status or (None if timer.cancelled_caught else exit)
        return CommandResult(
            output=output.output, exit_code=status.exit_code if status else None,
            signal=status.signal if status else None, truncated=output.truncated,
            timed_out=timer.cancelled_caught,
        )  # fmt: skip

    async def _release(self, which: TerminalParams, *, kill: bool) -> None:
        try:
            if kill:
                await self._conn.request("terminal/kill", which, object)
            await self._conn.request("terminal/release", which, object)
        except RpcError as exc:
            _log.warning("terminal %s not released: %s", which.terminal_id, exc.message)
