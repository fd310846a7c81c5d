"""The ``shell`` tool: one bash command in its own process group.

Not a sandbox: the command runs with the host user's authority. It starts in
a new session (``start_new_session``), so its process group holds it and its
children; on timeout, cancellation or any error the whole group gets SIGTERM,
then SIGKILL after a grace period. Cleanup is shielded and bounded.
"""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Final, TypeAlias

import msgspec
import trio

from runtime.llm import TextPart
from runtime.tools._authority import resolve_path
from runtime.tools._model import (
    CommandResult,
    CommandRun,
    ToolContext,
    ToolEnvironment,
    ToolError,
    ToolOutput,
)
from runtime.tools._tool import Tool

__all__ = [
    "ShellEnv",
    "ShellInput",
    "ShellLimits",
    "group_alive",
    "reporting_output",
    "shell_environment",
    "shell_tool",
]

_READ_CHUNK: Final = 65536
_POLL: Final = 0.02
_REPORT: ContextVar[Callable[[str], None] | None] = ContextVar(
    "kittiwake_shell_output", default=None
)
ShellEnv: TypeAlias = Callable[[str], Awaitable[Mapping[str, str]]]
"""Given a command's working directory, the variables set over the runtime's environment."""
_ENV: ContextVar[ShellEnv | None] = ContextVar("kittiwake_shell_env", default=None)


@contextmanager
def shell_environment(overlay: ShellEnv) -> Iterator[None]:
    """While in this block (this task and the tasks it starts), the shell tool runs its
    command with the variables *overlay* answers for its working directory set over the
    runtime's environment (``ToolRegistry.settle`` sets it from the registry's hooks)."""
    token = _ENV.set(overlay)
    try:
        yield
    finally:
        _ENV.reset(token)


@contextmanager
def reporting_output(report: Callable[[str], None]) -> Iterator[None]:
    """While in this block (this task and the tasks it starts), the shell tool passes
    its output to *report* as it reads it: each chunk of stdout or stderr, decoded
    (UTF-8, a character split between chunks kept whole). *report* must not block."""
    token = _REPORT.set(report)
    try:
        yield
    finally:
        _REPORT.reset(token)


class ShellInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``shell``: the command, an optional timeout in milliseconds, and a working
    directory relative to the Location."""

    command: str
    timeout: Annotated[int, msgspec.Meta(ge=1)] | None = None
    workdir: str | None = None
    description: str = ""


class ShellLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Timeouts (seconds), capture size per stream and the shell executable."""

    default_timeout: float = 120.0
    max_timeout: float = 600.0
    max_capture_bytes: int = 1024 * 1024
    kill_grace: float = 3.0
    eof_grace: float = 0.5
    shell: str = "bash"


class _Capture:
    """The last ``cap`` bytes of one stream, and how many earlier bytes were dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes | bytearray) -> None:
        self.data += chunk
        if len(self.data) > self.cap:
            excess = len(self.data) - self.cap
            del self.data[:excess]
            self.dropped += excess

    def text(self) -> str:
        body = self.data.decode("utf-8", errors="replace")
        if self.dropped:
            return f"[{self.dropped} earlier bytes dropped]\n{body}"
        return body


class _Run(msgspec.Struct, kw_only=True):
    stdout: _Capture
    stderr: _Capture
    timed_out: bool = False
    exit_code: int | None = None


DESCRIPTION: Final = (
    "Run a bash command in the project directory (or workdir, relative to it). timeout is in "
    "milliseconds (default 120000, at most 600000). Output of each stream is kept up to 1 MiB; "
    "the exit code is reported. The command runs with your user's full authority."
)


def shell_tool(limits: ShellLimits | None = None) -> Tool[ShellInput]:
    """The ``shell`` tool (permission ``bash``, resource: the command line)."""
    bounds = limits or ShellLimits()

    async def handler(data: ShellInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        seconds = min(
            data.timeout / 1000 if data.timeout else bounds.default_timeout, bounds.max_timeout
        )
        cwd = _workdir(env, data.workdir)
        if ctx.io is not None and ctx.io.run_command is not None:
            ran = CommandRun(
                command=data.command, cwd=cwd, timeout=seconds,
                output_limit=bounds.max_capture_bytes,
            )  # fmt: skip
            return _routed_output(await ctx.io.run_command(ctx, ran), seconds)
        overlay = _ENV.get()
        variables = None if overlay is None else await overlay(cwd)
        run = await _run(data.command, cwd, seconds, bounds, variables)
        return _output(run, seconds)

    return Tool(
        name="shell",
        description=DESCRIPTION,
        input_type=ShellInput,
        handler=handler,
        permission="bash",
        resources=lambda data, env: [data.command],
    )


def _workdir(env: ToolEnvironment, workdir: str | None) -> str:
    cwd = resolve_path(env, workdir or ".").absolute
    if not os.path.isdir(cwd):
        raise ToolError(f"Not a directory: {workdir}")
    return cwd


async def _run(
    command: str, cwd: str, seconds: float, limits: ShellLimits,
    variables: Mapping[str, str] | None = None,
) -> _Run:  # fmt: skip
    """Run *command* (with *variables* set over the environment); cancellation kills the
    process group (shielded, bounded) and propagates."""
    proc = await trio.lowlevel.open_process(
        [limits.shell, "-c", command],
        cwd=cwd,
        env={**os.environ, **variables} if variables else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    finished = False
    try:
        run = await _communicate(proc, seconds, limits)
        finished = not run.timed_out
        return run
    finally:
        with trio.move_on_after(limits.kill_grace + 2.0, shield=True):
            if not finished:
                await _kill_group(proc, limits.kill_grace)
            await _close(proc)


async def _communicate(proc: trio.Process, seconds: float, limits: ShellLimits) -> _Run:
    run = _Run(stdout=_Capture(limits.max_capture_bytes), stderr=_Capture(limits.max_capture_bytes))
    assert proc.stdout is not None and proc.stderr is not None
    with trio.move_on_after(seconds) as deadline:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, proc.stdout, run.stdout)
            nursery.start_soon(_drain, proc.stderr, run.stderr)
            run.exit_code = await proc.wait()
            # children may hold the pipes open: read what is there, then stop
            nursery.cancel_scope.deadline = trio.current_time() + limits.eof_grace
    run.timed_out = deadline.cancelled_caught
    return run


async def _close(proc: trio.Process) -> None:
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            await stream.aclose()
    await proc.wait()


async def _drain(stream: trio.abc.ReceiveStream, capture: _Capture) -> None:
    report = _REPORT.get()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := await stream.receive_some(_READ_CHUNK):
        capture.add(chunk)
        if report is not None and (text := decoder.decode(chunk)):
            report(text)


async def _kill_group(proc: trio.Process, grace: float) -> None:
    """SIGTERM the group, wait up to *grace* for it to go, SIGKILL whatever is left."""
    _signal_group(proc.pid, signal.SIGTERM)
    for _ in range(max(1, int(grace / _POLL))):
        if not group_alive(proc.pid):
            break
        await trio.sleep(_POLL)
    _signal_group(proc.pid, signal.SIGKILL)
    await proc.wait()


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """Tell whether process group *pgid* still has a live (non-zombie) member."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return _group_signalable(pgid)
    return any(_live_member(pid, pgid) for pid in pids)


def _live_member(pid: str, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return int(fields[2]) == pgid and fields[0] not in (b"Z", b"X")


def _group_signalable(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _output(run: _Run, seconds: float) -> ToolOutput:
    sections = [run.stdout.text()]
    stderr = run.stderr.text()
    if stderr:
        sections.append(f"[stderr]\n{stderr}")
    if run.timed_out:
        sections.append(f"Command timed out after {seconds:g} s; its process group was killed")
    else:
        sections.append(f"[exit code {run.exit_code}]")
    text = "\n".join(s.rstrip("\n") for s in sections if s)
    structured = {
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "stdout_dropped_bytes": run.stdout.dropped,
        "stderr_dropped_bytes": run.stderr.dropped,
    }
    return ToolOutput(content=[TextPart(text=text)], structured=structured)


def _routed_output(result: CommandResult, seconds: float) -> ToolOutput:
    """The result of a command the session's routed I/O ran (``ToolIO.run_command``: one
    output stream, in an editor's terminal), worded as a local run's."""
    sections = [("[earlier output dropped]\n" if result.truncated else "") + result.output]
    if result.timed_out:
        sections.append(f"Command timed out after {seconds:g} s; it was killed")
    elif result.exit_code is None and result.signal:
        sections.append(f"[killed by signal {result.signal}]")
    else:
        sections.append(f"[exit code {result.exit_code}]")
    text = "\n".join(s.rstrip("\n") for s in sections if s)
    structured = {
        "exit_code": result.exit_code, "timed_out": result.timed_out,
        "signal": result.signal, "output_truncated": result.truncated,
    }  # fmt: skip
    return ToolOutput(content=[TextPart(text=text)], structured=structured)
