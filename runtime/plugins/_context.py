"""What a plugin is given when it is made: the runtime, its Location, a process runner."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import msgspec
import trio

__all__ = ["PluginContext", "ProcessLimits", "ProcessResult"]

_CHUNK: Final = 65536


class ProcessLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds of :meth:`PluginContext.run`: seconds before the process is killed, and the
    bytes of each stream kept (the rest is read and dropped)."""

    timeout: float = 60.0
    max_output_bytes: int = 1024 * 1024


class ProcessResult(msgspec.Struct, frozen=True, kw_only=True):
    """A finished process: its exit code, its output (decoded, replacing what is not UTF-8),
    and whether either stream was cut at the limit."""

    code: int
    stdout: str
    stderr: str
    truncated: bool = False


class PluginContext:
    """Handed to a plugin's factory (``plugin(context, options)``).

    Attributes:
        name: the plugin's name.
        client: the runtime's in-process API (``actors.Runtime``: ``client.sessions``,
            ``client.tools``, ...), or ``None`` when the runtime was not given one.
        project: the key the Location's saved approvals are filed under.
        directory: the Location's directory.
        worktree: the root of its git worktree (the directory itself outside one).
        server_url: the gateway's URL once the runtime is served, else ``None`` (read it
            when needed: a plugin may be made before serving starts).
        options: the plugin's options from its configuration entry.
        log: a logger named ``kittiwake.plugin.<name>``.
    """

    def __init__(
        self, *, name: str, client: Any, project: str, directory: str, worktree: str,
        server_url: Callable[[], str | None], options: Mapping[str, Any], limits: ProcessLimits,
    ) -> None:  # fmt: skip
        self.name = name
        self.client = client
        self.project = project
        self.directory = directory
        self.worktree = worktree
        self._server_url = server_url
        self.options = dict(options)
        self.log = logging.getLogger(f"kittiwake.plugin.{name}")
        self._limits = limits

    @property
    def server_url(self) -> str | None:
        return self._server_url()

    async def run(
        self, command: Sequence[str], *, cwd: str | None = None,
        env: Mapping[str, str] | None = None, seconds: float | None = None,
    ) -> ProcessResult:  # fmt: skip
        """Run *command* (an argument list; no shell) in *cwd* (default: the Location) with
        *env* set over the runtime's environment, and wait for it.

        Raises ``trio.TooSlowError`` past *seconds* (default: the host's limit), after
        killing the process; ``OSError`` when it cannot start. Cancellation kills it.
        """
        limit = self._limits.max_output_bytes
        streams: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        cut = False

        async def read(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
            nonlocal cut
            while chunk := await stream.receive_some(_CHUNK):
                room = limit - len(into)
                if len(chunk) > room:
                    cut = True
                into += chunk[: max(room, 0)]

        with trio.fail_after(seconds if seconds is not None else self._limits.timeout):
            process = await trio.lowlevel.open_process(
                list(command), cwd=cwd or self.directory, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env={**os.environ, **env} if env else None,
            )  # fmt: skip
            try:
                async with trio.open_nursery() as nursery:
                    assert process.stdout is not None and process.stderr is not None
                    nursery.start_soon(read, process.stdout, streams["stdout"])
                    nursery.start_soon(read, process.stderr, streams["stderr"])
                code = await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()
                    with trio.CancelScope(shield=True):
                        await process.wait()
        return ProcessResult(
            code=code, stdout=streams["stdout"].decode(errors="replace"),
            stderr=streams["stderr"].decode(errors="replace"), truncated=cut,
        )  # fmt: skip
