"""Running commands: a template by name, expanded and admitted as a session's prompt.

Expansion (``runtime.agents``): ``$ARGUMENTS`` / ``$1``...; then each ``!`command` `` span
runs in the Location's directory (``bash -c``, bounded in time and output) and is replaced by
its output; then each ``@path`` naming a file inside the Location brings the file's text in,
appended as ``<file path="...">`` blocks. Files are read in a worker thread.

The prompts of the Location's connected MCP servers are commands too (``<server>:<prompt>``):
their template is fetched from the server when one runs, with ``$1``... in place of its
arguments, and only the arguments are put in (a server's text runs no shell command and
brings in no file).
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from runtime import InputAdmitted, InvalidInputError, ModelRef, Prompt
from runtime.agents import (
    CommandInfo,
    expand_arguments,
    file_mentions,
    load_commands,
    replace_shell,
    shell_spans,
)
from runtime.config import global_config_dir
from runtime.plugins import CommandCall
from runtime.tools import ToolError

if TYPE_CHECKING:
    from actors.api._sessions import Sessions
    from runtime.mcp import McpServers
    from runtime.plugins import LocationPlugins

__all__ = ["CommandLimits", "Commands"]

_TRUNCATED: Final = "\n... (output truncated)"


class CommandLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds of running one command.

    Attributes:
        max_file_bytes: largest command file read.
        shell_timeout: seconds one ``!`command` `` may run before it is killed.
        shell_output: bytes of one command's output kept.
        mention_bytes: bytes of one ``@file`` brought in.
        max_mentions: ``@file`` mentions brought in per command.
    """

    max_file_bytes: int = 64 * 1024
    shell_timeout: float = 30.0
    shell_output: int = 64 * 1024
    mention_bytes: int = 256 * 1024
    max_mentions: int = 20


class Commands:
    """The commands of each Location, and running one in a session."""

    def __init__(
        self, *, sessions: Callable[[], Sessions], env: dict[str, str] | None,
        run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
        limits: CommandLimits | None = None,
        mcp: Callable[[str], Awaitable[McpServers]] | None = None,
        plugins: Callable[[str], Awaitable[LocationPlugins]] | None = None,
    ) -> None:  # fmt: skip
        self._sessions = sessions
        self._mcp = mcp
        self._plugins = plugins
        self._global = global_config_dir(env) if env is not None else None
        self._run_blocking = run_blocking
        self.limits = limits or CommandLimits()

    async def list(self, directory: str) -> builtins.list[CommandInfo]:
        """The Location's commands by name (read afresh, off the trio thread)."""
        found = await self._load(directory)
        return [found[name] for name in sorted(found)]

    async def _load(self, directory: str) -> dict[str, CommandInfo]:
        load = await self._run_blocking(
            lambda: load_commands(directory, self._global, max_bytes=self.limits.max_file_bytes)
        )
        commands: dict[str, CommandInfo] = dict(load.commands)
        if self._mcp is not None:
            servers = await self._mcp(directory)
            commands.update((c.name, c) for c in servers.commands() if c.name not in commands)
        return commands

    async def run(
        self, session_id: str, name: str, arguments: str = "", *, message_id: str | None = None,
        agent: str | None = None, model: ModelRef | None = None,
    ) -> InputAdmitted:  # fmt: skip
        """Expand command *name* with *arguments* and admit it as the session's prompt. The
        command's (or the given) agent and model are selected first, from this turn on.

        Raises:
            SessionNotFoundError: no such session.
            InvalidInputError: an unknown command; InvalidSessionInputError for an agent
                or model the session cannot use.
        Cancellation abandons the expansion (a running shell command is killed); nothing
        is admitted unless the admission had begun. The Location's plugins may change the
        expanded text (``command_execute_before``); a required one failing raises
        ``PluginHookError`` and nothing is admitted.
        """
        sessions = self._sessions()
        info = await sessions.get(session_id)
        directory = info.location.directory
        found = await self._load(directory)
        command = found.get(name)
        if command is None:
            known = ", ".join(sorted(found))
            raise InvalidInputError(f"Unknown command {name!r}; known commands: {known}")
        if command.source == "mcp" and self._mcp is not None:
            servers = await self._mcp(directory)
            try:
                template = await servers.prompt_template(name)
            except (LookupError, ToolError) as exc:
                raise InvalidInputError(f"Command {name!r} failed: {exc}") from None
            text = expand_arguments(template, arguments)
        else:
            text = await self.expand(command, arguments, directory)
        if self._plugins is not None:  # command_execute_before, once the plugins are loaded
            plugins = await self._plugins(directory)
            await plugins.wait_settled()
            call = CommandCall(
                command=name, arguments=arguments, session_id=session_id, directory=directory
            )
            text = await plugins.command_text(call, text)
        chosen = agent or command.agent
        if chosen is not None and chosen != info.agent:
            await sessions.switch_agent(session_id, chosen)
        picked = model or ModelRef.parse(command.model)
        if picked is not None and picked != info.model:
            await sessions.switch_model(session_id, picked)
        return await sessions.prompt(session_id, prompt=Prompt(text=text), id=message_id)

    async def expand(self, command: CommandInfo, arguments: str, directory: str) -> str:
        """The prompt text of *command* run with *arguments* in *directory*."""
        text = expand_arguments(command.template, arguments)
        outputs = [await self._shell(line, directory) for line in shell_spans(text)]
        text = replace_shell(text, outputs)
        mentioned = file_mentions(text)[: self.limits.max_mentions]
        blocks = []
        for path in mentioned:
            content = await self._run_blocking(partial(self._read, directory, path))
            if content is not None:
                blocks.append(f'<file path="{path}">\n{content}\n</file>')
        return "\n\n".join([text, *blocks])

    async def _shell(self, line: str, directory: str) -> str:
        limits = self.limits
        with trio.move_on_after(limits.shell_timeout) as timer:
            done = await trio.run_process(
                ["bash", "-c", line], cwd=directory, capture_stdout=True, capture_stderr=True,
                check=False, stdin=b"",
            )  # fmt: skip
        if timer.cancelled_caught:
            return f"(command timed out after {limits.shell_timeout:g} s: {line})"
        output = (done.stdout + done.stderr).decode("utf-8", errors="replace").strip()
        if len(output) > limits.shell_output:
            output = output[: limits.shell_output] + _TRUNCATED
        return output

    def _read(self, directory: str, path: str) -> str | None:
        """The text of *path* if it is a file inside *directory* (blocking); else None."""
        root = os.path.realpath(directory)
        target = os.path.realpath(os.path.join(root, path))
        if os.path.commonpath([root, target]) != root or not os.path.isfile(target):
            return None
        with open(target, "rb") as handle:
            raw = handle.read(self.limits.mention_bytes + 1)
        text = raw[: self.limits.mention_bytes].decode("utf-8", errors="replace")
        return text + _TRUNCATED if len(raw) > self.limits.mention_bytes else text
