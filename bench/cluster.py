"""Cluster mode against one process: prompts/s, streaming delay, one prompt's latency.

Run: .venv/bin/python bench/cluster.py [--workers 1,2,4] [--sessions 20,200]
                                       [--streams 100,200] [--rounds 3] [--sequential 50]
                                       [--stream-seconds 0.18] [--stream-chunks 10]
                                       [--stream-via sse,ws]

Everything runs on this machine, in real processes: a temporary PostgreSQL cluster
(``tests/postgres.py``: Debian's binaries, unix socket), a zero-latency OpenAI-compatible
mock provider (this file with ``--mock``: ``bench/gateway.py``'s lean HTTP/1.1 answer, plus
a streamed answer for the streaming figure), and the servers as a person starts them:
``kittiwake serve`` on a DuckDB data dir (the single-process figure), and ``kittiwake serve
--store postgresql://... --workers N`` on a new database for each N. Telemetry is off in
both (as in ``bench/gateway.py``'s headline). The client is ``bench/gateway.py``'s lean
keep-alive client, one connection per session.

Measured for each server:

- one session, ``--rounds`` series of ``--sequential`` prompts one after another (``POST
  /prompt`` then ``POST /wait``): the median of the series' medians and of their p95s, and
  PostgreSQL's commits per prompt; the difference to DuckDB is what cluster mode adds to
  one prompt;
- S sessions prompted at once (``--sessions``), ``--rounds`` rounds: prompts/s (median),
  and the server's CPU per prompt (workers and, for cluster mode, every PostgreSQL process)
  with PostgreSQL's commits per prompt;
- K sessions streaming at once (``--streams``), ``--rounds`` rounds of K new sessions:
  every answer streams ``--stream-chunks`` chunks spread evenly over ``--stream-seconds``
  (default 10 chunks over 0.18 s, 20 ms apart), each carrying the time it was sent. Each
  session is followed on its own connection (so on any worker) opened before the
  prompts, and all K prompts leave at one moment. ``--stream-via sse`` follows the
  session's ``/api/session/{id}/event`` stream (durable events; the prompt is a ``POST
  /prompt``), ``ws`` an ``/api/ws`` websocket that subscribes and sends the prompt (live
  deltas too; the worker that admits the prompt drives it), ``v1`` no stream: OpenCode's
  ``POST /session/{id}/message`` naming the streamed model, whose answer comes at the
  turn's end and is taken as the answer's end (the way to compare with OpenCode, whose
  V1 events have no durable ``text.ended``). Per session: the *added
  delay*, the prompt's sending to the durable ``session.next.text.ended``'s arrival minus
  the answer's length; the prompt to the answer's first event on the stream (the first
  delta on a websocket; ``text.started`` on the SSE stream, durable only at the part's
  end); the last chunk's sending to ``text.ended`` (what the server added after the
  answer ended); the prompt to the mock's first chunk (admission and provider request);
  over a websocket each delta's delay and the share of chunks that arrived as deltas
  (median, p95 and max over the sessions, each the median over the rounds). Each round
  also prints the load average, the window from the prompts to the last answer, the
  server's CPU in it and how long its event loops waited for a CPU.

Then ``opencode serve --pure`` (``bench/_opencode.py``, offline, ``make opencode``) on the
same mock, measured by the same client through OpenCode's V1 routes (``POST /session``,
``POST /session/{id}/message``, which answers when the turn has ended): one prompt's
latency and S sessions at once, each capped at ``--opencode-timeout`` seconds (0 skips it);
its streams only with ``--stream-via v1`` (after one warm-up session: its first turns load
much), each round capped the same.

After them, the lease takeover time: two ``serve --store --lease-ttl T`` processes, the one
driving a session SIGKILLed inside a provider turn, a prompt admitted through the other;
the seconds from the kill to its answer (``--lease-ttl``, default 2 and 10 s).

Before the servers: PostgreSQL's own commit rate, one-row insert transactions back to back
from 1, 4 and 16 connections (``--commit-connections``), the ceiling a cluster's commits
share.

``docs/benchmarks.md`` makes its paper estimate for 32 cores and ten machines from the
CPU and commits per prompt and the commit rate measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import h11
import httpx
import msgspec
import psycopg
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._lean import (  # noqa: E402 - after the path is set
    LeanClient,
    chat_answer,
    cpu_seconds,
    free_port,
)

FAST, STREAMED = "mock-model", "stream-model"
CHUNKS, SECONDS = 10, 0.18
"""The streamed answer's default: 10 chunks 20 ms apart."""
_PROMPT = msgspec.json.encode({"prompt": {"text": "hi"}})
_V1_PROMPT = msgspec.json.encode({"parts": [{"type": "text", "text": "hi"}]})


# -- the mock provider: the lean answer, or a timed stream ------------------------------------


def _stream_chunk(finish: bool) -> bytes:
    delta: dict[str, Any] = {} if finish else {"content": f"{time.time():.6f};"}
    chunk = {
        "id": "c", "object": "chat.completion.chunk", "model": STREAMED,
        "choices": [{"index": 0, "delta": delta, "finish_reason": "stop" if finish else None}],
    }  # fmt: skip
    return b"data: " + msgspec.json.encode(chunk) + b"\n\n"


def _stream_length(chunks: int) -> int:
    """Bytes of a streamed answer of *chunks* timed chunks (every timestamp has the same
    width), its finishing chunk and ``[DONE]``."""
    return len(_stream_chunk(False)) * chunks + len(_stream_chunk(True)) + 14


async def _mock(stream: trio.SocketStream, chunks: int = CHUNKS, seconds: float = SECONDS) -> None:
    """One keep-alive connection, ``bench/gateway.py``'s framing: a request naming the
    streamed model gets *chunks* timed chunks spread evenly over *seconds* (the first at
    once, the last *seconds* later, each sent at its time from the request's arrival, not
    after the previous one's sleep, so a late wake-up does not push the rest back;
    content-length framed); any other gets ``bench/gateway.py``'s one answer."""
    answer = chat_answer()
    fast = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
        + str(len(answer)).encode() + b"\r\n\r\n" + answer
    )  # fmt: skip
    spacing = seconds / max(1, chunks - 1)
    buffer = b""
    try:
        while True:
            while (end := buffer.find(b"\r\n\r\n")) < 0:
                more = await stream.receive_some(65536)
                if not more:
                    return
                buffer += more
            head = buffer[:end].lower()
            _, found, rest = head.partition(b"\r\ncontent-length:")
            length = int(rest.split(b"\r\n", 1)[0]) if found else 0
            while len(buffer) < end + 4 + length:
                more = await stream.receive_some(65536)
                if not more:
                    return
                buffer += more
            body, buffer = buffer[end + 4 : end + 4 + length], buffer[end + 4 + length :]
            if b'"hang"' in body and _last_user(body) == "hang":
                await trio.sleep(3600)  # a turn the driver is killed in
            if STREAMED.encode() not in body:
                await stream.send_all(fast)
                continue
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
                + str(_stream_length(chunks)).encode() + b"\r\n\r\n"
            )  # fmt: skip
            start = trio.current_time()
            for i in range(chunks):
                await trio.sleep_until(start + i * spacing)
                await stream.send_all(_stream_chunk(False))
            await stream.send_all(_stream_chunk(True) + b"data: [DONE]\n\n")
    except (trio.BrokenResourceError, trio.ClosedResourceError, ValueError):
        return


def _last_user(body: bytes) -> str:
    users = [m for m in json.loads(body)["messages"] if m["role"] == "user"]
    content = users[-1]["content"] if users else ""
    return content if isinstance(content, str) else ""


async def _serve_mock(port: int, chunks: int = CHUNKS, seconds: float = SECONDS) -> None:
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    print(f"http://127.0.0.1:{port}", flush=True)
    await trio.serve_listeners(partial(_mock, chunks=chunks, seconds=seconds), listeners)


# -- servers ---------------------------------------------------------------------------------


def _environment(tmp: Path, mock_url: str, root: Path = ROOT) -> dict[str, str]:
    """A data dir whose catalog has the mock provider with both models; telemetry off; the
    servers run the checkout at *root*."""
    data = tmp / "data"
    data.mkdir(parents=True)
    models = {
        name: {"id": name, "name": name, "tool_call": True, "limit": {"context": 131072}}
        for name in (FAST, STREAMED)
    }
    catalog = {
        "mock": {
            "id": "mock", "name": "Mock", "npm": "@ai-sdk/openai-compatible",
            "api": mock_url + "/v1", "env": ["MOCK_API_KEY"], "models": models,
        }
    }  # fmt: skip
    (data / "models-dev.json").write_text(json.dumps(catalog))
    config = {"model": f"mock/{FAST}", "telemetry": {"enabled": False}}
    env = {**os.environ, "HOME": str(tmp), "KITTIWAKE_DATA_DIR": str(data)}
    env.update(MOCK_API_KEY="mock", KITTIWAKE_CONFIG_CONTENT=json.dumps(config))
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    env["PYTHONPATH"] = str(root)
    return env


class Server(msgspec.Struct):
    url: str
    pids: list[int]
    """The processes that serve: the one server, or every worker."""


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


@asynccontextmanager
async def _serving(
    tmp: Path, mock_url: str, store: str | None, workers: int, root: Path = ROOT
) -> AsyncIterator[Server]:
    env = _environment(tmp, mock_url, root)
    argv = [sys.executable, "-m", "gateway", "serve", "--port", str(free_port())]
    if store is not None:
        argv += ["--store", store, "--workers", str(workers)]
    errors = open(tmp / "stderr", "wb")  # noqa: ASYNC230, SIM115 - a new local file; closed below
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, env=env, cwd=tmp
    )
    try:
        assert process.stdout is not None
        seen = b""
        with trio.fail_after(120):
            while b"serving http" not in seen or not seen.endswith(b"\n"):
                chunk = await process.stdout.receive_some(4096)
                if not chunk:
                    said = (tmp / "stderr").read_text(errors="replace").strip().splitlines()
                    raise RuntimeError(f"did not start: {said[-1] if said else seen.decode()}")
                seen += chunk
        url = seen.split(b"serving ")[1].split()[0].decode()
        pids = [process.pid] if store is None else _children(process.pid)
        yield Server(url, pids)
    finally:
        errors.close()
        process.terminate()
        with trio.move_on_after(60):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


# -- measures ------------------------------------------------------------------------------


async def _sessions(url: str, n: int, model: str = FAST, v1: bool = False) -> list[str]:
    body = {"model": {"id": model, "providerID": "mock"}}
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        if v1:  # OpenCode's routes: its configured default model
            return [(await client.post("/session", json={})).json()["id"] for _ in range(n)]
        return [
            (await client.post("/api/session", json=body)).json()["data"]["id"] for _ in range(n)
        ]


async def _prompt(client: LeanClient, sid: str, v1: bool = False) -> float:
    """One prompt to its answer: V2 ``/prompt`` then ``/wait``, or V1 ``/message`` (which
    answers when the turn has ended)."""
    start = time.perf_counter()
    if v1:
        await client.post(f"/session/{sid}/message", _V1_PROMPT)
        return time.perf_counter() - start
    await client.post(f"/api/session/{sid}/prompt", _PROMPT)
    await client.post(f"/api/session/{sid}/wait")
    return time.perf_counter() - start


async def _sequential(
    url: str, n: int, rounds: int, pg: str | None = None, v1: bool = False
) -> tuple[float, float, float]:
    """*rounds* series of *n* prompts one after another in one session: the median of the
    series' medians, of their p95s, and PostgreSQL's commits per prompt (0 without *pg*)."""
    (sid,) = await _sessions(url, 1, v1=v1)
    client = await LeanClient.open(url)
    medians: list[float] = []
    p95s: list[float] = []
    try:
        for _ in range(5):
            await _prompt(client, sid, v1)
        commits0 = _commits(pg) if pg else 0
        for _ in range(rounds):
            samples = sorted([await _prompt(client, sid, v1) for _ in range(n)])
            medians.append(statistics.median(samples))
            p95s.append(samples[min(len(samples) - 1, int(len(samples) * 0.95))])
        commits = (_commits(pg) - commits0) / (n * rounds) if pg else 0.0
    finally:
        await client.aclose()
    return statistics.median(medians), statistics.median(p95s), commits


class Costs(msgspec.Struct):
    rate: float
    cpu_ms: float
    """Server CPU per prompt (workers, plus PostgreSQL in cluster mode), milliseconds."""
    pg_cpu_ms: float
    commits: float
    """PostgreSQL commits per prompt (0 for DuckDB)."""


async def _at_once(
    url: str,
    n: int,
    rounds: int,
    pids: list[int],
    pg: tuple[str, list[int]] | None,
    v1: bool = False,
) -> Costs:
    sids = await _sessions(url, n, v1=v1)
    clients = [await LeanClient.open(url) for _ in sids]
    try:

        async def round_() -> float:
            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for c, s in zip(clients, sids, strict=True):
                    nursery.start_soon(_prompt, c, s, v1)
            return time.perf_counter() - start

        await round_()  # warm
        cpu0 = sum(cpu_seconds(p) for p in pids)
        pg0 = sum(cpu_seconds(p) for p in pg[1]) if pg else 0.0
        commits0 = _commits(pg[0]) if pg else 0
        took = [await round_() for _ in range(rounds)]
        prompts = n * rounds
        cpu = (sum(cpu_seconds(p) for p in pids) - cpu0) / prompts
        pg_cpu = ((sum(cpu_seconds(p) for p in pg[1]) - pg0) / prompts) if pg else 0.0
        commits = ((_commits(pg[0]) - commits0) / prompts) if pg else 0.0
    finally:
        for c in clients:
            await c.aclose()
    return Costs(
        statistics.median(n / t for t in took), (cpu + pg_cpu) * 1000, pg_cpu * 1000, commits
    )


def _commits(url: str) -> int:
    """PostgreSQL's transaction id counter (every writing transaction takes one; this
    reading one too, so successive calls differ by one more than the commits between)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("select txid_current()").fetchone()
    return int(row[0]) - 1 if row else 0


class StreamFigures(msgspec.Struct):
    """K streams at once, one round: each figure's (median, p95, max) over the sessions,
    seconds."""

    added: tuple[float, float, float]
    """The prompt's sending to the answer's end on the stream (the durable
    ``session.next.text.ended``), minus the answer's length."""
    first: tuple[float, float, float]
    """The prompt's sending to the answer's first event on the stream: the first live
    text delta on a websocket, the durable ``text.started`` on the SSE stream (durable
    events of a text part are written at its end)."""
    before: tuple[float, float, float]
    """The prompt's sending to the mock's first chunk (admission and provider request)."""
    late: tuple[float, float, float]
    """The mock's own lateness: its first to last chunk, minus the answer's length."""
    tail: tuple[float, float, float]
    """The mock's last chunk to the ``text.ended`` on the stream."""
    relay: tuple[float, float, float] | None = None
    """Websocket only: each live delta's arrival minus its chunk's sending, over every
    delta of every session."""
    deltas: float | None = None
    """Websocket only: the share of the chunks that arrived as live deltas (a worker
    that does not drive the session relays none; a slow reader's are dropped)."""
    window: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """From the prompts' sending to the last answer's end: seconds, the CPU seconds the
    server's processes used in them, and the seconds their main threads (each serving
    process's event loop) were runnable but waiting for a CPU (the machine's load)."""


def _main_wait(pids: list[int]) -> float:
    """Seconds the main threads of *pids* spent runnable but waiting for a CPU."""
    from bench.profile import _thread_wait

    return sum(_thread_wait(pid).get(pid, 0.0) for pid in pids)


def _spread(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return statistics.median(ordered), p95, ordered[-1]


class _Seen(msgspec.Struct):
    """What one session's follower saw, ``time.time()`` seconds (this machine's clock,
    which the mock's timestamps share)."""

    sent: float = 0.0
    first: float = 0.0
    ended: float = 0.0
    chunks: list[float] = msgspec.field(default_factory=list)
    """When the mock sent each chunk (the timestamps the answer's text carries)."""
    relay: list[float] = msgspec.field(default_factory=list)
    """Each live delta's arrival minus its chunk's sending."""


def _timestamps(text: str) -> list[float]:
    return [float(t) for t in text.rstrip(";").split(";") if t]


async def _follow_sse(
    url: str, sid: str, ready: trio.Event, go: trio.Event, seen: _Seen,
    clients: dict[str, LeanClient],
) -> None:  # fmt: skip
    """Open the session's ``/api/session/{id}/event`` stream (h11 on a socket of its own),
    set *ready* once its head arrived, prompt at *go* (``POST /prompt`` on the session's
    connection in *clients*, opened once every stream is ready: an idle connection is
    closed after the server's 5 s keep-alive), and read until the durable
    ``session.next.text.ended``."""
    host, port = url.removeprefix("http://").split(":")
    conn = h11.Connection(h11.CLIENT)
    request = h11.Request(
        method="GET", target=f"/api/session/{sid}/event", headers=[("host", host)]
    )
    buffer = b""
    async with await trio.open_tcp_stream(host, int(port)) as stream:
        await stream.send_all(conn.send(request) + conn.send(h11.EndOfMessage()))
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
                continue
            if isinstance(event, h11.Response):
                ready.set()
                await go.wait()
                seen.sent = time.time()
                await clients[sid].post(f"/api/session/{sid}/prompt", _PROMPT)
            elif isinstance(event, h11.Data):
                now = time.time()
                buffer += bytes(event.data)
                *frames, buffer = buffer.split(b"\n\n")
                for frame in frames:
                    lines = frame.decode().splitlines()
                    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
                    kind = fields.get("event", "")
                    if kind == "session.next.text.started" and not seen.first:
                        seen.first = now
                    elif kind == "session.next.text.ended":
                        seen.ended = now
                        seen.chunks = _timestamps(json.loads(fields["data"])["data"]["text"])
                        return
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                raise RuntimeError(f"the event stream of {sid} ended")


async def _follow_ws(
    url: str, sid: str, ready: trio.Event, go: trio.Event, seen: _Seen,
    clients: dict[str, LeanClient],
) -> None:  # fmt: skip
    """Subscribe to the session on an ``/api/ws`` connection of its own, set *ready* once
    subscribed, send the prompt on the same connection at *go* (so the worker that admits
    it, and drives the turn, is the one relaying its live deltas), and read until the
    durable ``session.next.text.ended``. *clients* is not used."""
    from trio_websocket import open_websocket_url

    ws_url = url.replace("http://", "ws://") + "/api/ws"
    async with open_websocket_url(ws_url, max_message_size=64 * 1024 * 1024) as ws:
        await ws.send_message(json.dumps({"type": "subscribe", "ref": 1, "sessionID": sid}))
        while json.loads(await ws.get_message()).get("ref") != 1:
            pass
        ready.set()
        await go.wait()
        seen.sent = time.time()
        prompt = {"type": "prompt", "ref": 2, "sessionID": sid, "prompt": {"text": "hi"}}
        await ws.send_message(json.dumps(prompt))
        while True:
            frame = json.loads(await ws.get_message())
            now = time.time()
            if frame.get("type") == "reply" and "error" in frame:
                raise RuntimeError(frame["error"])
            if frame.get("type") == "delta":
                seen.first = seen.first or now
                seen.relay += [now - t for t in _timestamps(frame["event"]["data"]["delta"])]
            elif frame.get("type") == "event":
                if frame["event"]["type"] == "session.next.text.ended":
                    seen.ended = now
                    seen.chunks = _timestamps(frame["event"]["data"]["text"])
                    return


async def _follow_v1(
    url: str, sid: str, ready: trio.Event, go: trio.Event, seen: _Seen,
    clients: dict[str, LeanClient], provider: str = "mock",
) -> None:  # fmt: skip
    """Prompt at *go* through OpenCode's ``POST /session/{id}/message`` naming the streamed
    model of *provider* (on the session's connection in *clients*), which answers when the
    turn has ended: its answer is the end, the chunk timestamps its text part's. No stream:
    *ready* at once, and no first event."""
    ready.set()
    await go.wait()
    seen.sent = time.time()
    body = {
        "model": {"providerID": provider, "modelID": STREAMED},
        "parts": [{"type": "text", "text": "hi"}],
    }
    answer = json.loads(
        await clients[sid].post(f"/session/{sid}/message", json.dumps(body).encode())
    )
    seen.ended = time.time()
    texts = [part["text"] for part in answer["parts"] if part.get("type") == "text"]
    seen.chunks = _timestamps("".join(texts))


async def _stream_delays(
    url: str, n: int, seconds: float, via: str, pids: list[int], limit: float | None = None,
    provider: str = "mock",
) -> StreamFigures | None:  # fmt: skip
    """*n* new sessions on the streamed model, each followed on its own connection (so on
    any worker) through *via* (``sse``: the session's event stream, ``ws``: a websocket,
    ``v1``: no stream, OpenCode's ``POST /session/{id}/message`` answering at the turn's
    end; sessions made through ``POST /session``, the model named per prompt, *provider*'s),
    are prompted at one moment; their answers stream over *seconds*. None if a session
    saw no answer in *limit* s (default ``30 + 10 * seconds``; a stream on a worker that
    does not hear the others' commits)."""
    sids = await _sessions(url, n, STREAMED, v1=via == "v1")
    seen = [_Seen() for _ in sids]
    go = trio.Event()
    follow = {
        "sse": _follow_sse, "ws": _follow_ws, "v1": partial(_follow_v1, provider=provider)
    }[via]  # fmt: skip
    clients: dict[str, LeanClient] = {}
    try:
        with trio.move_on_after(limit or 30 + 10 * seconds):
            async with trio.open_nursery() as nursery:
                for sid, each in zip(sids, seen, strict=True):
                    ready = trio.Event()
                    nursery.start_soon(follow, url, sid, ready, go, each, clients)
                    await ready.wait()
                for sid in sids if via != "ws" else []:
                    clients[sid] = await LeanClient.open(url)
                cpu, waited = sum(cpu_seconds(p) for p in pids), _main_wait(pids)
                start = time.perf_counter()
                go.set()
        window = (
            time.perf_counter() - start, sum(cpu_seconds(p) for p in pids) - cpu,
            _main_wait(pids) - waited,
        )  # fmt: skip
    finally:
        for client in clients.values():
            await client.aclose()
    if any(not s.ended for s in seen):
        return None
    relay = [lag for s in seen for lag in s.relay]
    return StreamFigures(
        added=_spread([s.ended - s.sent - seconds for s in seen]),
        first=_spread([(s.first or s.ended) - s.sent for s in seen]),  # v1: the end
        before=_spread([s.chunks[0] - s.sent for s in seen]),
        late=_spread([s.chunks[-1] - s.chunks[0] - seconds for s in seen]),
        tail=_spread([s.ended - s.chunks[-1] for s in seen]),
        relay=_spread(relay) if relay else None,
        deltas=len(relay) / sum(len(s.chunks) for s in seen) if via == "ws" else None,
        window=window,
    )


async def _stream_rounds(
    server: Server, n: int, via: str, args: argparse.Namespace, limit: float | None = None,
    provider: str = "mock",
) -> StreamFigures | None:  # fmt: skip
    """``--rounds`` rounds of :func:`_stream_delays`, each printed with the load average
    at its start and the CPU seconds the server's processes and this client used in it;
    each figure the median over the rounds (None if a round saw no answer)."""
    rounds: list[StreamFigures] = []
    for r in range(args.rounds):
        load = (await trio.Path("/proc/loadavg").read_text()).split()[0]
        cpu, client = sum(cpu_seconds(p) for p in server.pids), time.process_time()
        figures = await _stream_delays(
            server.url, n, args.stream_seconds, via, server.pids, limit, provider
        )
        cpu = sum(cpu_seconds(p) for p in server.pids) - cpu
        print(f"{n} streams ({via}), round {r + 1} (load average {load}; CPU s: server "
              f"{cpu:.1f}, client {time.process_time() - client:.1f}): "
              f"{_cell(figures, True)}", flush=True)  # fmt: skip
        if figures is None:
            return None
        rounds.append(figures)

    def median(field: str) -> Any:
        values = [getattr(f, field) for f in rounds if getattr(f, field) is not None]
        if not values:
            return None
        if isinstance(values[0], float):
            return statistics.median(values)
        return tuple(statistics.median(v[i] for v in values) for i in range(len(values[0])))

    return StreamFigures(**{field: median(field) for field in StreamFigures.__struct_fields__})


def _cell(figures: StreamFigures | None, parts: bool = False) -> str:
    """The table's cell: the added delay, the first event, the tail (and, over a
    websocket, each delta's relay); with *parts* also the added delay's other parts (the
    first chunk after the prompt, the mock's lateness)."""
    if figures is None:
        return "no answer on the streams"

    def ms(spread: tuple[float, float, float]) -> str:
        median, p95, most = (v * 1000 for v in spread)
        return f"{median:.0f} ms ({p95:.0f}, {most:.0f})"

    cell = f"{ms(figures.added)}; {ms(figures.first)}; {ms(figures.tail)}"
    if figures.deltas is not None:
        relay = ms(figures.relay) if figures.relay else "none"
        cell += f"; deltas {relay}, {figures.deltas:.0%} of chunks"
    if parts:
        cell += f"; first chunk {ms(figures.before)}; mock late {ms(figures.late)}"
        wall, cpu, waited = figures.window
        cell += f"; window {wall:.1f} s: server CPU {cpu:.1f} s, its loops waited {waited:.1f} s"
    return cell


def _commit_rate(url: str, connections: int, seconds: float) -> float:
    """PostgreSQL's commits/s with *connections* threads each committing one-row inserts
    (``synchronous_commit`` on, as the store runs) back to back for *seconds*."""
    import threading

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("create table if not exists bench_commit (n bigint)")
    counts = [0] * connections
    stop = time.perf_counter() + seconds

    def loop(i: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while time.perf_counter() < stop:
                conn.execute("insert into bench_commit values (%s)", [i])
                counts[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


async def _takeover(tmp: Path, mock_url: str, store: str, ttl: float) -> float:
    """Seconds from SIGKILL of the worker driving a session (inside a provider turn) to
    the answer of a prompt admitted through another worker right after: the lease's
    expiry, the survivor's sweep, recovery and one turn. Two lone ``serve --store``."""
    procs: list[trio.Process] = []
    urls: list[str] = []
    try:
        for name in ("a", "b"):
            env = _environment(tmp / name, mock_url)
            argv = [
                sys.executable, "-m", "gateway", "serve", "--port", str(free_port()),
                "--store", store, "--lease-ttl", str(ttl),
            ]  # fmt: skip
            proc = await trio.lowlevel.open_process(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env=env, cwd=tmp / name,
            )  # fmt: skip
            procs.append(proc)
            assert proc.stdout is not None
            seen = b""
            with trio.fail_after(120):
                while b"serving http" not in seen or not seen.endswith(b"\n"):
                    seen += await proc.stdout.receive_some(4096)
            urls.append(seen.split(b"serving ")[1].split()[0].decode())
        a, b = urls
        async with httpx.AsyncClient(timeout=120) as client:
            body = {"model": {"id": FAST, "providerID": "mock"}}
            sid = (await client.post(a + "/api/session", json=body)).json()["data"]["id"]
            await client.post(f"{a}/api/session/{sid}/prompt", json={"prompt": {"text": "hang"}})
            await trio.sleep(0.5)  # the driver is inside the turn
            procs[0].kill()
            killed = time.perf_counter()
            await client.post(f"{b}/api/session/{sid}/prompt", json={"prompt": {"text": "hi"}})
            await client.post(f"{b}/api/session/{sid}/wait")
            return time.perf_counter() - killed
    finally:
        for proc in procs:
            proc.kill()
            await proc.wait()


# -- the run -------------------------------------------------------------------------------


async def _measure(args: argparse.Namespace) -> None:
    from tests.postgres import PostgresCluster

    mock_port = free_port()
    mock = await trio.lowlevel.open_process(
        [
            sys.executable, __file__, "--mock", str(mock_port), "--stream-chunks",
            str(args.stream_chunks), "--stream-seconds", str(args.stream_seconds),
        ],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    cluster = await trio.to_thread.run_sync(PostgresCluster.start)
    rows: list[tuple[str, dict[str, Any]]] = []
    try:
        scratch = cluster.create_database()
        for n in args.commit_connections:
            rate = await trio.to_thread.run_sync(_commit_rate, scratch, n, 3.0)
            print(f"PostgreSQL commits/s with {n} connections: {rate:.0f}", flush=True)
        mock_url = f"http://127.0.0.1:{mock_port}"
        targets: list[int | None] = [None, *args.workers]
        for workers in targets:
            name = "DuckDB, 1 process" if workers is None else f"PostgreSQL, {workers} workers"
            store = None if workers is None else cluster.create_database()
            row: dict[str, Any] = {}
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    async with _serving(Path(tmp), mock_url, store, workers or 1) as server:
                        pg = None
                        if store is not None:
                            postmaster = int(
                                (cluster.data / "postmaster.pid").read_text().split()[0]
                            )
                            pg = (store, [postmaster, *_children(postmaster)])
                        if args.sequential:
                            row["sequential"] = await _sequential(
                                server.url, args.sequential, args.rounds, store
                            )
                        for n in args.sessions:
                            row[f"at_once_{n}"] = await _at_once(
                                server.url, n, args.rounds, server.pids, pg
                            )
                        for n in args.streams:
                            for via in args.stream_via:
                                row[f"streams_{n}_{via}"] = await _stream_rounds(
                                    server, n, via, args
                                )
                except RuntimeError as exc:
                    row["error"] = (
                        str(exc).strip().splitlines()[-1] if str(exc).strip() else "failed"
                    )
            rows.append((name, row))
            print(name, msgspec.json.encode(row).decode(), flush=True)
        if args.opencode_timeout > 0:
            rows.append(("OpenCode 1.18.33", await _opencode_row(mock_port, args)))
        for ttl in args.lease_ttl:
            with tempfile.TemporaryDirectory() as tmp:
                took = await _takeover(Path(tmp), mock_url, cluster.create_database(), ttl)
            print(f"takeover with --lease-ttl {ttl:g}: {took:.2f} s", flush=True)
    finally:
        mock.terminate()
        await mock.wait()
        await trio.to_thread.run_sync(cluster.stop)
    _report(rows, args)


async def _opencode_row(mock_port: int, args: argparse.Namespace) -> dict[str, Any]:
    """``opencode serve --pure`` on the same mock, through its V1 routes (``POST /session``,
    ``POST /session/{id}/message``), the same client; each measure capped at
    ``--opencode-timeout`` seconds (a capped one is recorded as ``None``). CPU is the
    ``opencode`` process's and its children's. Streams only through ``--stream-via v1``
    (its V1 events carry no durable ``text.ended`` of ours to time), each round capped
    the same."""
    from bench._opencode import OpenCodeServe

    row: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        serve = OpenCodeServe(Path(tmp), mock_port, (FAST, STREAMED))
        try:
            await trio.to_thread.run_sync(serve.start)
            assert serve.process is not None
            pids = [serve.process.pid, *_children(serve.process.pid)]
            with trio.move_on_after(args.opencode_timeout):
                if args.sequential:
                    row["sequential"] = await _sequential(
                        serve.url, args.sequential, args.rounds, v1=True
                    )
            for n in args.sessions:
                row[f"at_once_{n}"] = None
                with trio.move_on_after(args.opencode_timeout):
                    row[f"at_once_{n}"] = await _at_once(
                        serve.url, n, args.rounds, pids, None, v1=True
                    )
                print(f"OpenCode {n} at once: {row[f'at_once_{n}']}", flush=True)
            server = Server(serve.url, pids)
            if args.streams and "v1" in args.stream_via:  # warm: its first turns load much
                with trio.move_on_after(args.opencode_timeout):
                    await _stream_delays(
                        serve.url, 1, args.stream_seconds, "v1", pids, None, "local"
                    )
            for n in args.streams if "v1" in args.stream_via else []:
                row[f"streams_{n}_v1"] = await _stream_rounds(
                    server, n, "v1", args, args.opencode_timeout, "local"
                )
        except RuntimeError as exc:
            row["error"] = str(exc).strip().splitlines()[-1] if str(exc).strip() else "failed"
        finally:
            await trio.to_thread.run_sync(serve.stop)
    for n in args.streams:
        for via in args.stream_via:
            row.setdefault(f"streams_{n}_{via}", "not measured")
    print("OpenCode", row, flush=True)
    return row


def _report(rows: list[tuple[str, dict[str, Any]]], args: argparse.Namespace) -> None:
    print()
    header = ["server", "1 prompt median (p95), commits/prompt"]
    header += [f"{n} at once: prompts/s, CPU ms/prompt (PG), commits/prompt" for n in args.sessions]
    header += [
        f"{n} streams of {args.stream_seconds:g} s ({via}): added to the end; to the first "
        "event; last chunk to text.ended: median (p95, max)"
        for n in args.streams
        for via in args.stream_via
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, row in rows:
        if "error" in row:
            print(f"| {name} | {row['error']} |")
            continue
        if not args.sequential:
            cells = [name, "not measured"]
        elif row.get("sequential") is None:
            cells = [name, "timed out"]
        else:
            median, p95, commits = row["sequential"]
            cells = [name, f"{median * 1000:.1f} ms ({p95 * 1000:.1f} ms), {commits:.2f}"]
        for n in args.sessions:
            c: Costs | None = row[f"at_once_{n}"]
            if c is None:
                cells.append(f"timed out after {args.opencode_timeout:g} s")
                continue
            cells.append(f"{c.rate:.0f}/s, {c.cpu_ms:.2f} ({c.pg_cpu_ms:.2f}), {c.commits:.2f}")
        for s in (row[f"streams_{n}_{via}"] for n in args.streams for via in args.stream_via):
            cells.append(
                "no answer on the streams" if s is None else s if isinstance(s, str) else _cell(s)
            )
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mock", type=int, metavar="PORT")
    parser.add_argument("--workers", default="1,2,4", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument(
        "--sessions", default="20,200", type=lambda s: [int(x) for x in s.split(",") if x]
    )
    parser.add_argument(
        "--streams", default="100,200", type=lambda s: [int(x) for x in s.split(",") if x]
    )
    parser.add_argument(
        "--commit-connections", default="1,4,16",
        type=lambda s: [int(x) for x in s.split(",") if x],
    )  # fmt: skip
    parser.add_argument(
        "--lease-ttl", default="2,10", type=lambda s: [float(x) for x in s.split(",") if x]
    )
    parser.add_argument(
        "--opencode-timeout", type=float, default=300.0,
        help="seconds each OpenCode measure may take (0: OpenCode is not run)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sequential", type=int, default=50, help="0: not measured")
    parser.add_argument(
        "--stream-seconds", type=float, default=SECONDS,
        help="a streamed answer's length: its first chunk to its last",
    )  # fmt: skip
    parser.add_argument("--stream-chunks", type=int, default=CHUNKS)
    parser.add_argument(
        "--stream-via", default="sse", type=lambda s: s.split(","),
        help="how each session follows its answer: sse (its event stream, durable events), "
        "ws (a websocket, on which it also prompts: live deltas too), v1 (no stream: "
        "OpenCode's POST /session/{id}/message, answered at the turn's end; OpenCode too), "
        "or several: sse,ws,v1",
    )  # fmt: skip
    args = parser.parse_args()
    try:
        if args.mock:
            trio.run(_serve_mock, args.mock, args.stream_chunks, args.stream_seconds)
        else:
            trio.run(_measure, args)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
