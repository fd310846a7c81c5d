"""``kittiwake tui``: OpenCode's terminal UI (``opencode attach``) on a Kittiwake server.

The UI is OpenCode's own (the npm package ``opencode-ai``), found on ``PATH``. The server is,
in this order: ``--attach URL``; the ``kittiwake serve`` (or other ``kittiwake tui``) that
holds the data dir, found through the journal's holder and the URL it recorded in
``<data dir>/serving.json``; else a ``kittiwake serve`` started in a child process on
``--port`` (any free port by default) for as long as the UI runs, its output in
``<data dir>/log/tui-serve.log`` rather than over the UI. A data dir held by a process that
recorded no URL (an in-process ``kittiwake run``) is an error, as for the other commands.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import trio

from gateway._datadir import (
    CliError,
    default_data_dir,
    server_headers,
    server_to_reuse,
    serving_url,
)

__all__ = ["OPENCODE_PACKAGE", "OPENCODE_VERSION", "find_opencode", "tui"]

OPENCODE_PACKAGE: Final = "opencode-ai"
OPENCODE_VERSION: Final = "1.18.33"
"""The version of OpenCode's clients Kittiwake is tested with (``clients/package.json``)."""
_MISSING: Final = (
    "OpenCode's terminal UI is not installed: no `opencode` on PATH. Install the npm package "
    f"{OPENCODE_PACKAGE} (tested: {OPENCODE_VERSION}): npm install -g "
    f"{OPENCODE_PACKAGE}@{OPENCODE_VERSION}; or prompt from here with `kittiwake run`"
)
_VERSION_TIMEOUT: Final = 10.0
"""Seconds ``opencode --version`` may take before the UI starts without the check."""
_HEALTH_TIMEOUT: Final = 5.0
_START_TIMEOUT: Final = 60.0
"""Seconds a server started here may take to record its URL."""
_STOP_TIMEOUT: Final = 20.0
"""Seconds it may take to stop on SIGTERM before it is killed."""
_POLL: Final = 0.05


def find_opencode(path: str | None) -> str:
    """The ``opencode`` executable on *path* (a ``PATH`` value).

    Raises:
        CliError: there is none; the message names the npm package and its tested version.
    """
    found = shutil.which("opencode", path=path)
    if found is None:
        raise CliError(_MISSING)
    return found


def _project_directory(named: str | None) -> Path:
    """*named* (``--directory``), else the current directory, resolved; ``CliError`` (exit 2)
    when it is not a directory."""
    directory = Path(named or os.getcwd()).resolve()
    if not directory.is_dir():
        raise CliError(f"--directory {directory}: not a directory", 2)
    return directory


async def _check_reachable(url: str, password: str | None) -> None:
    """Raise ``CliError`` (exit 2) unless ``GET url/api/health`` answers 200."""
    import httpx

    try:
        async with httpx.AsyncClient(headers=server_headers(), timeout=_HEALTH_TIMEOUT) as client:
            answer = await client.get(url.rstrip("/") + "/api/health")
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach the server {url}: {exc}", 2) from None
    if answer.status_code != 200:
        raise CliError(f"the server {url} answered {answer.status_code} to /api/health", 2)


class _Version:
    """``opencode --version``, read while the server starts; a warning when it is not the
    tested version. A failure to read it is not one: the UI starts anyway."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.version: str | None = None
        self.done = trio.Event()

    async def read(self) -> None:
        try:
            with trio.move_on_after(_VERSION_TIMEOUT):
                done = await trio.run_process(
                    [self.binary, "--version"], capture_stdout=True, capture_stderr=True,
                    check=False,
                )  # fmt: skip
                self.version = done.stdout.decode(errors="replace").strip() or None
        except OSError:
            pass
        finally:
            self.done.set()

    async def warn(self) -> None:
        await self.done.wait()
        if self.version is not None and self.version != OPENCODE_VERSION:
            print(
                f"kittiwake: warning: opencode {self.version} is on PATH; Kittiwake is tested "
                f"with {OPENCODE_PACKAGE} {OPENCODE_VERSION}",
                file=sys.stderr,
            )


async def _attach(binary: str, url: str, args: argparse.Namespace, *, directory: Path | None,
                  password: str | None) -> int:  # fmt: skip
    """Run ``opencode attach URL`` on this terminal until it exits; its exit status.

    On cancellation the UI is terminated (trio's ``run_process``) and Cancelled propagates.
    """
    command = [binary, "attach", url]
    if directory is not None:  # a server of another directory: the UI works in this one
        command += ["--dir", str(directory)]
    if args.continue_latest:
        command.append("--continue")
    if args.session:
        command += ["--session", args.session]
    env = dict(os.environ)
    if password:
        env["OPENCODE_SERVER_PASSWORD"] = password
    done = await trio.run_process(command, stdin=None, check=False, env=env)
    return done.returncode


def _started(process: trio.Process, data_dir: Path, log: Path) -> str | None:
    """The URL the child *process* recorded in *data_dir*, None while it starts.

    Raises:
        CliError: it exited; the message is the last line of its *log*.
    """
    if process.returncode is not None:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        last = lines[-1].removeprefix("kittiwake: ") if lines else "no output"
        raise CliError(f"the server did not start: {last} (log: {log})")
    return serving_url(data_dir, process.pid)


@asynccontextmanager
async def _served(args: argparse.Namespace, data_dir: Path) -> AsyncIterator[str]:
    """``kittiwake serve`` of *data_dir* in a child process on ``--hostname``/``--port``,
    its output appended to ``<data dir>/log/tui-serve.log``; yields its URL once it has
    recorded it in ``serving.json``.

    Leaving (also on cancellation) stops the child with SIGTERM and waits for it, SIGKILL
    after ``_STOP_TIMEOUT``. Should this process die first, the child stops as its lifeline
    pipe closes.

    Raises:
        CliError: the child exited before serving (its last log line), or did not record a
            URL within ``_START_TIMEOUT``.
    """
    log = data_dir / "log" / "tui-serve.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    lifeline, keep = os.pipe()
    command = [
        sys.executable, "-m", "gateway", "serve", "--port", str(args.port),
        "--hostname", args.hostname, "--data-dir", str(data_dir),
        "--directory", str(args.directory), "--lifeline-fd", str(lifeline),
    ]  # fmt: skip
    try:
        with log.open("ab") as out:
            process = await trio.lowlevel.open_process(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, pass_fds=(lifeline,)
            )
    finally:
        os.close(lifeline)
    try:
        url = None
        with trio.move_on_after(_START_TIMEOUT):
            while True:  # another process's file: polled
                url = _started(process, data_dir, log)
                if url is not None:
                    break
                await trio.sleep(_POLL)
        if url is None:
            raise CliError(f"the server did not start within {_START_TIMEOUT:.0f} s (log: {log})")
        yield url
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.terminate()
                with trio.move_on_after(_STOP_TIMEOUT):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
        os.close(keep)


async def tui(args: argparse.Namespace) -> int:
    """``kittiwake tui``: the UI's exit status once it exits.

    A server started here (``kittiwake serve`` in a child process) stops when the UI exits,
    or when this is cancelled.

    Raises:
        CliError: no ``opencode`` on PATH (before anything starts), the server to reuse is
            unreachable (exit 2), the data dir is held by a process serving no URL, or the
            server started here did not start.
    """
    binary = find_opencode(os.environ.get("PATH"))
    named: str | None = args.directory
    args.directory = _project_directory(named)
    password = os.environ.get("KITTIWAKE_SERVER_PASSWORD") or None
    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    url = server_to_reuse(args.attach, data_dir, "tui")
    version = _Version(binary)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(version.read)
        if url is not None:
            await _check_reachable(url, password)
            await version.warn()
            # A server found through the data dir is local: the UI works in this directory.
            # One named by --attach may be elsewhere: --directory only when given.
            directory = None if args.attach and not named else args.directory
            return await _attach(binary, url, args, directory=directory, password=password)
        async with _served(args, data_dir) as served:
            await version.warn()
            return await _attach(binary, served, args, directory=None, password=password)
