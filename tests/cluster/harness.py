"""Kittiwake clusters in real processes for tests and benchmarks.

``Workers`` runs ``kittiwake serve --store URL --workers N`` (one parent, N worker
processes on one socket); ``Node`` runs one ``kittiwake serve --store URL`` on its own port,
as a machine of a cluster would, so a test can send each request to the worker it names.
Both against a temporary PostgreSQL (``tests/postgres.py``) and the local provider speaking
OpenAI's wire format (``tests/llm/conftest.py``), which a ``responder`` answers here:
every prompt is answered ``re: <its text>``, so order and duplicates show in the history.
``Node`` also serves a data dir of its own without a store URL (DuckDB).

``Seen`` is what clients of a torture see of sessions' durable seqs: each session's SSE
stream and one websocket subscribed to all of them, followed across killed servers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import ConnectionClosed, HandshakeError, wrap_client_stream

from runtime.titles import TITLE_PROMPT
from tests.gateway.test_cli_run import Cli, chunk, said
from tests.llm.conftest import LocalServer, Recorded, Reply
from tests.llm.streams import sse

__all__ = [
    "STREAMS_LEFT",
    "Node",
    "Seen",
    "Workers",
    "answer_each",
    "children",
    "exited",
    "history",
    "last_user_text",
    "read_until",
    "titled",
    "titled_sessions",
    "torture_answers",
]

_START: float = 60.0
_STOP: float = 30.0
_RECONNECT: float = 0.05
"""Seconds between a follower's attempts to reach a server that is down (being restarted)."""
_TITLE: str = "A torture title"

STREAMS_LEFT = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpx.*:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore.*:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]
"""The marks of a test whose clients leave httpx streams (and requests) in the middle: a
killed server, a cancelled follower. httpx's streaming iterators are nested async
generators, and trio reports the inner ones collected unexhausted; the streams themselves
are closed."""


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


def titled(cli: Cli) -> None:
    """Configure *cli*'s project so that the local model writes new sessions' titles (the
    local provider has no priced small model to choose)."""
    (cli.project / "kittiwake.json").write_text(json.dumps({"small_model": "local/m1"}))


async def titled_sessions(client: httpx.AsyncClient, count: int, model: Any) -> list[str]:
    """*count* new sessions of *model*, each answered once and titled by ``torture_answers``
    (a durable ``session.updated``, seen on ``/api/event``), through *client*."""
    sids = [
        (await client.post("/api/session", json={"model": model})).json()["data"]["id"]
        for _ in range(count)
    ]
    titled: set[str] = set()
    with trio.fail_after(30):
        async with client.stream("GET", "/api/event", timeout=None) as events:
            lines = events.aiter_lines()
            async for line in lines:
                if line.startswith("data: ") and "server.connected" in line:
                    break
            for sid in sids:
                body = {"prompt": {"text": "first"}}
                await client.post(f"/api/session/{sid}/prompt", json=body)
            async for line in lines:
                if line.startswith("data: "):
                    event = json.loads(line[6:])
                    if event["type"] == "session.updated":
                        titled.add(event["properties"]["info"]["id"])
                    if titled >= set(sids):
                        break
        for sid in sids:
            await client.post(f"/api/session/{sid}/wait")
    return sids


def torture_answers(provider: LocalServer) -> None:
    """Have *provider* answer a title request at once, a prompt holding ``slow`` in ten
    chunks 50 ms apart (time for a kill or an interrupt to land mid-answer), refuse one
    holding ``fail`` (400: the run fails), and answer any other ``re: <last user text>``."""

    def respond(request: Recorded) -> Reply:
        if TITLE_PROMPT[:40] in json.dumps(request.json()["messages"][:1]):
            return said(_TITLE)
        text = last_user_text(request)
        if "fail" in text.split():
            return Reply(status=400, json_body={"error": {"message": "refused: " + text}})
        if "slow" in text.split():
            pieces = [chunk({"role": "assistant", "content": "re: "})]
            pieces += [chunk({"content": f"{text} {n} "}) for n in range(9)]
            body = [sse(p) for p in pieces] + [sse(chunk({}, finish="stop"), done=True)]
            return Reply(chunks=body, delay=0.05)
        return said(f"re: {text}")

    provider.responder = respond


async def history(client: httpx.AsyncClient, sid: str, *, limit: int = 100) -> list[Any]:
    """Every event of the session's history, paged *limit* at a time (``after`` the last)."""
    out: list[Any] = []
    while True:
        params = {"limit": limit, **({"after": out[-1]["durable"]["seq"]} if out else {})}
        response = await client.get(f"/api/session/{sid}/history", params=params)
        assert response.status_code == 200, response.text
        out += response.json()["data"]
        if not response.json()["hasMore"]:
            return out


class Seen:
    """The durable seqs clients saw of *sids* on the server at *url*: on each session's SSE
    stream (``sse``) and on one websocket subscribed to all of them (``ws``). Every
    follower resumes after the last seq it saw whenever its connection drops (a killed
    server or worker), retrying until it is served again. A client's continuity check runs
    on every event as it arrives: the first seq is 1 and each next one follows the one
    before; ``broken`` lists every event that failed it."""

    def __init__(self, url: str, sids: list[str]) -> None:
        self.url = url
        self.sse: dict[str, list[int]] = {sid: [] for sid in sids}
        self.ws: dict[str, list[int]] = {sid: [] for sid in sids}
        self.broken: list[str] = []

    def _saw(self, seqs: list[int], where: str, sid: str, seq: int, kind: str) -> None:
        if seq != (seqs[-1] + 1 if seqs else 1):
            self.broken.append(f"{where} {sid}: {kind} {seq} after {seqs[-1:]}")
        seqs.append(seq)

    async def follow(self, nursery: trio.Nursery) -> None:
        """Start every follower in *nursery*; they run until it is cancelled."""
        for sid in self.sse:
            nursery.start_soon(self._sse, sid)
        nursery.start_soon(self._ws)

    def reached(self, last: dict[str, int]) -> bool:
        """Whether every follower has seen each session up to its seq in *last*."""
        return all(seen[sid][-1:] == [n] for seen in (self.sse, self.ws) for sid, n in last.items())

    async def _sse(self, sid: str) -> None:
        seqs = self.sse[sid]
        timeout = httpx.Timeout(10, read=None)
        async with httpx.AsyncClient(base_url=self.url, timeout=timeout) as client:
            while True:
                params = {"after": seqs[-1]} if seqs else {}
                try:
                    async with client.stream(
                        "GET", f"/api/session/{sid}/event", params=params
                    ) as response:
                        if response.status_code == 200:
                            async for line in response.aiter_lines():
                                if line.startswith("data: "):
                                    event = json.loads(line[6:])
                                    seq = event["durable"]["seq"]
                                    self._saw(seqs, "sse", sid, seq, event["type"])
                except httpx.TransportError:
                    pass
                await trio.sleep(_RECONNECT)

    async def _ws(self) -> None:
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        while True:
            try:
                stream = await trio.open_tcp_stream(host, int(port))
            except OSError:
                await trio.sleep(_RECONNECT)
                continue
            try:  # the stream closes whatever happens (a failed handshake included)
                async with stream, trio.open_nursery() as nursery:
                    ws = await wrap_client_stream(nursery, stream, host, "/api/ws")
                    for sid, seqs in self.ws.items():
                        frame: dict[str, Any] = {"type": "subscribe", "ref": sid, "sessionID": sid}
                        if seqs:
                            frame["after"] = seqs[-1]
                        await ws.send_message(json.dumps(frame))
                    while True:
                        message = json.loads(await ws.get_message())
                        if message["type"] == "event":
                            sid, seq = message["sessionID"], message["seq"]
                            kind = message["event"]["type"]
                            self._saw(self.ws[sid], "ws", sid, seq, kind)
            except* (OSError, trio.BrokenResourceError, HandshakeError, ConnectionClosed):
                pass
            await trio.sleep(_RECONNECT)


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
    async def running(
        cls, cli: Cli, store: str | None, *extra: str, name: str, port: int = 0
    ) -> AsyncIterator[Node]:
        """Serve on *port* (0: a free one) until the block ends (SIGTERM, unless the test
        ended it another way), with a data dir of its own, ``<cli.data>-<name>`` (a
        machine's: its telemetry file is its own, and its DuckDB store when *store* is
        ``None``), holding the local provider's catalog."""
        data = cli.data.with_name(f"{cli.data.name}-{name}")
        data.mkdir(exist_ok=True)
        catalog = cli.data / "models-dev.json"
        if catalog.exists():
            shutil.copy(catalog, data / catalog.name)
        where = ["--store", store] if store is not None else []
        process = await trio.lowlevel.open_process(
            cli.argv("serve", "--port", str(port), *where, "--data-dir", str(data), *extra),
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
