"""Kittiwake clusters in real processes for tests and benchmarks.

``Workers`` runs ``kittiwake serve --store URL --workers N`` (one parent, N worker
processes on one socket); ``Node`` runs one ``kittiwake serve --store URL`` on its own port,
as a machine of a cluster would, so a test can send each request to the worker it names.
Both against a temporary PostgreSQL (``tests/postgres.py``) and the local provider speaking
OpenAI's wire format (``tests/llm/conftest.py``), which a ``responder`` answers here:
every prompt is answered ``re: <its text>``, so order and duplicates show in the history.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from tests.gateway.test_cli_run import Cli, said
from tests.llm.conftest import LocalServer, Recorded, Reply

__all__ = [
    "Node",
    "Workers",
    "answer_each",
    "children",
    "exited",
    "last_user_text",
    "read_until",
]

_START: float = 60.0
_STOP: float = 30.0


def last_user_text(request: Recorded) -> str:
    """The text of the last user message of a chat-completions request."""
    users = [m for m in request.json()["messages"] if m["role"] == "user"]
    content = users[-1]["content"]
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


def answer_each(provider: LocalServer) -> None:
    """Have *provider* answer every request ``re: <last user text>`` (no queue)."""

    def respond(request: Recorded) -> Reply:
        return said(f"re: {last_user_text(request)}")

    provider.responder = respond


async def read_until(stream: trio.abc.ReceiveStream, pattern: bytes, seen: bytearray) -> bytes:
    """Read *stream* into *seen* until *pattern* (a regex) matches; the match's first group."""
    while True:
        found = re.search(pattern, bytes(seen))
        if found is not None:
            return found.group(1)
        chunk = await stream.receive_some(4096)
        assert chunk, f"the stream ended before {pattern!r}:\n{seen.decode(errors='replace')}"
        seen += chunk


def children(pid: int) -> list[int]:
    """The process ids of *pid*'s children (Linux ``/proc``)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text()
        found += [int(p) for p in text.split()]
    return sorted(found)


async def exited(pid: int) -> None:
    """Wait until process *pid* (any process, not only a child) has exited: its pidfd
    becomes readable then (Linux 5.3)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


class Workers:
    """A running ``kittiwake serve --workers N``; its ``url``, ``process`` and ``stderr``
    (the parent's and its workers', collected from the start)."""

    def __init__(self, process: trio.Process, url: str, stderr: bytearray) -> None:
        self.process = process
        self.url = url
        self.stderr = stderr

    def worker_pids(self) -> list[int]:
        return children(self.process.pid)

    @classmethod
    @asynccontextmanager
    async def running(
        cls, cli: Cli, store: str, count: int, *extra: str, env: Mapping[str, str] | None = None
    ) -> AsyncIterator[Workers]:
        """Serve until the block ends, then SIGTERM the parent and check it exits 0. *env*
        replaces ``cli.env``. A parent that exits before serving fails the test with its
        standard error."""
        process = await trio.lowlevel.open_process(
            cli.argv("serve", "--port", "0", "--store", store, "--workers", str(count), *extra),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=cli.project, env=cli.env if env is None else env,
        )  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        stderr = bytearray()
        try:
            async with trio.open_nursery() as nursery:
                ended = trio.Event()
                nursery.start_soon(_collect, process.stderr, stderr, ended)
                seen = bytearray()
                try:
                    with trio.fail_after(_START):
                        url = await read_until(process.stdout, rb"serving (http://\S+) with", seen)
                except AssertionError as exc:
                    with trio.fail_after(_STOP):  # every writer gone: all of it was read
                        await ended.wait()
                    raise AssertionError(f"{exc}\n{stderr.decode(errors='replace')}") from None
                workers = cls(process, url.decode(), stderr)
                yield workers
                await workers.stop()
                nursery.cancel_scope.cancel()
        finally:
            if process.returncode is None:
                process.kill()
                with trio.CancelScope(shield=True):
                    await process.wait()

    async def stop(self) -> None:
        """SIGTERM the parent; wait for it to exit (it stops its workers first)."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        with trio.fail_after(_STOP):
            await self.process.wait()


class Node:
    """One ``kittiwake serve --store URL`` process on its own port (one machine's worker)."""

    def __init__(self, process: trio.Process, url: str) -> None:
        self.process = process
        self.url = url
        self.stderr = bytearray()

    @classmethod
    @asynccontextmanager
    async def running(cls, cli: Cli, store: str, *extra: str, name: str) -> AsyncIterator[Node]:
        """Serve until the block ends (SIGTERM, unless the test ended it another way), with
        a data dir of its own, ``<cli.data>-<name>`` (a machine's: its telemetry file is
        its own), holding the local provider's catalog."""
        data = cli.data.with_name(f"{cli.data.name}-{name}")
        data.mkdir(exist_ok=True)
        catalog = cli.data / "models-dev.json"
        if catalog.exists():
            shutil.copy(catalog, data / catalog.name)
        process = await trio.lowlevel.open_process(
            cli.argv("serve", "--port", "0", "--store", store, "--data-dir", str(data), *extra),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=cli.project, env=cli.env,
        )  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        try:
            seen = bytearray()
            with trio.fail_after(_START):
                url = await read_until(process.stdout, rb"serving (http://\S+) ", seen)
            node = cls(process, url.decode())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_collect, process.stderr, node.stderr)
                yield node
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    os.kill(process.pid, signal.SIGCONT)  # in case a test left it stopped
                    process.send_signal(signal.SIGTERM)
                    with trio.move_on_after(_STOP):
                        await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()


async def _collect(
    stream: trio.abc.ReceiveStream, into: bytearray, ended: trio.Event | None = None
) -> None:
    while chunk := await stream.receive_some(4096):
        into += chunk
    if ended is not None:
        ended.set()
