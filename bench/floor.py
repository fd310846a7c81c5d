"""The floor under a served prompt: the design's libraries alone, without Kittiwake.

Run: .venv/bin/python bench/floor.py [--rounds 5] [--sequential 300] [--concurrent 20]
                                     [--cold 5] [--levels bare,provider,store,kittiwake]

Kittiwake serves a Quart-Trio app with Hypercorn's trio worker, reaches its provider with
httpx and keeps its store in an embedded DuckDB file (``design/brief.md``). This benchmark
serves the same libraries with the least a prompt can do through them, level by level, each
a child process measured exactly as ``kittiwake serve`` is:

- ``hypercorn``: ``hypercorn.trio.serve`` (the gateway's ``Config`` values) and a bare ASGI
  callable answering the same three routes as ``bare`` (no framework);
- ``bare``: a ``QuartTrio`` app under ``hypercorn.trio.serve`` (the gateway's ``Config`` values)
  answering ``GET /api/health``, ``POST /api/session/{id}/prompt`` (the
  JSON body read and decoded with msgspec, a JSON answer) and ``POST .../wait`` (a JSON
  answer), nothing of Kittiwake's imported;
- ``provider``: and the prompt streams one chat-completions answer from the local mock
  through one ``httpx.AsyncClient`` on Kittiwake's provider transport (h11 framing, one
  pooled connection checked per request: ``provider_http_client``), made at the first
  prompt so that the start and idle figures hold none of Kittiwake's code;
- ``store``: and two DuckDB files open as the runtime opens them (the store's and
  telemetry's, each a table created and queried at start), each prompt writing two rows
  (the admission and the turn, a commit each) on a worker thread;
- ``kittiwake``: ``kittiwake serve``'s runtime as ``bench/gateway.py`` serves it (the same
  mock as its provider, telemetry recorded at ``serve``'s default sampling); its cold starts
  are ``kittiwake serve`` itself.

For each level, ``--rounds`` fresh servers, alternating levels within a round: the server's
CPU per prompt (every thread, from ``/proc``) over ``--sequential`` prompts in one session
and over ``--sequential`` prompts spread across ``--concurrent`` sessions at once (the lean
client: ``POST /prompt`` then ``POST /wait``), and ``--cold`` fresh starts (to the first 200
of ``/api/health``: seconds, CPU by then, RSS one second later). Medians over the rounds.
The floor levels' collectors are settled as ``kittiwake serve`` settles its own.
``--one-request`` sends one request per prompt instead: the floor levels' prompt route
alone, and Kittiwake's OpenCode route ``POST /session/{id}/message``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._lean import LeanClient, cpu_seconds, free_port, wait_healthy  # noqa: E402
from bench.gateway import _first_200, _status  # noqa: E402

LEVELS = ("hypercorn", "bare", "provider", "store", "kittiwake")
_PROMPT_BODY = msgspec.json.encode({"prompt": {"text": "hi"}})
_V1_PROMPT_BODY = msgspec.json.encode({"parts": [{"type": "text", "text": "hi"}]})
# ``bench/gateway.py --serve`` records telemetry at ``kittiwake serve``'s default with this set
_WARM_ENV = {**os.environ, "KITTIWAKE_BENCH_TELEMETRY": "1"}


# -- the floor servers (this file with --serve) ----------------------------------------------


def _open_duckdb(path: Path) -> Any:
    """A DuckDB file as the runtime opens its two: one table created and read."""
    import duckdb

    db = duckdb.connect(str(path), config={"threads": 1})
    db.execute("CREATE TABLE IF NOT EXISTS records (id BIGINT, body VARCHAR)")
    db.execute("SELECT count(*) FROM records").fetchall()
    return db


async def _raw_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ``hypercorn`` level's app: the same three routes as a bare ASGI callable."""
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": message["type"] + ".complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path: str = scope["path"]
    if path.endswith("/prompt"):
        data: object = {"session": path.split("/")[3], "admitted": True}
        msgspec.json.decode(body)
    elif path.endswith("/wait"):
        data = {"session": path.split("/")[3], "status": "idle"}
    else:
        data = {"ok": True}
    answer = msgspec.json.encode({"data": data})
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(answer)).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


async def _serve_floor(level: str, port: int, data_dir: str, mock: str) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()  # the values of the gateway's ``server_config``, without importing it
    config.bind = [f"127.0.0.1:{port}"]
    config.keep_alive_timeout, config.backlog = 5.0, 1024
    config.h11_max_incomplete_size, config.accesslog, config.errorlog = 16 * 1024, None, None
    app: Any = _raw_asgi if level == "hypercorn" else _quart_app(level, data_dir, mock)
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(serve, app, config, mode="asgi"))
        gc.freeze()
        gc.enable()
        print(f"http://127.0.0.1:{port}", flush=True)


def _quart_app(level: str, data_dir: str, mock: str) -> Any:
    import httpx
    from quart import Response, request
    from quart_trio import QuartTrio

    app = QuartTrio("floor", static_folder=None)
    clients: list[httpx.AsyncClient] = []
    store = _open_duckdb(Path(data_dir) / "store.duckdb") if level == "store" else None
    if store is not None:
        _open_duckdb(Path(data_dir) / "telemetry.duckdb")
    written, writer = [0], trio.CapacityLimiter(1)  # one writing thread, as the store's

    def write(body: str) -> None:
        assert store is not None
        written[0] += 1
        store.execute("INSERT INTO records VALUES (?, ?)", [written[0], body])

    def answer(data: object) -> Response:
        return Response(msgspec.json.encode({"data": data}), content_type="application/json")

    @app.get("/api/health")
    async def health() -> Response:
        return answer({"ok": True})

    @app.post("/api/session/<sid>/prompt")
    async def prompt(sid: str) -> Response:
        body = msgspec.json.decode(await request.get_data())
        if store is not None:
            await trio.to_thread.run_sync(write, body["prompt"]["text"], limiter=writer)
        if level != "bare":
            if not clients:  # made at the first prompt: start and idle hold none of it
                from runtime.llm import provider_http_client

                clients.append(provider_http_client())
            chat = {"model": "mock-model", "stream": True, "messages": [
                {"role": "user", "content": body["prompt"]["text"]}]}  # fmt: skip
            url = mock + "/v1/chat/completions"
            async with clients[0].stream("POST", url, json=chat) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        msgspec.json.decode(line[6:])
        if store is not None:
            await trio.to_thread.run_sync(write, "ok", limiter=writer)
        return answer({"session": sid, "admitted": True})

    @app.post("/api/session/<sid>/wait")
    async def wait(sid: str) -> Response:
        return answer({"session": sid, "status": "idle"})

    return app


# -- measuring -------------------------------------------------------------------------------


class Warm(msgspec.Struct):
    sequential: float  # server CPU seconds per prompt, one session
    concurrent: float  # server CPU seconds per prompt, sessions at once
    rate: float  # prompts/s, sessions at once


class Cold(msgspec.Struct):
    wall: float
    cpu: float
    rss: float


def _argv(level: str, port: int, data_dir: str, mock: str) -> list[str]:
    if level == "kittiwake":
        return [sys.executable, str(ROOT / "bench" / "gateway.py"), "--serve", str(port),
                data_dir, mock]  # fmt: skip
    return [sys.executable, __file__, "--serve", level, str(port), data_dir, mock]


async def _session(url: str, level: str, one: bool) -> str:
    if level != "kittiwake":
        return f"ses_{os.urandom(4).hex()}"
    client = await LeanClient.open(url)
    try:
        if one:  # OpenCode's route: the session's own id
            return str(msgspec.json.decode(await client.post("/session", b"{}"))["id"])
        return str(msgspec.json.decode(await client.post("/api/session", b"{}"))["data"]["id"])
    finally:
        await client.aclose()


async def _prompts(client: LeanClient, sid: str, n: int, *, kittiwake: bool, one: bool) -> None:
    """*n* prompts: ``POST /prompt`` then ``POST /wait``; with *one*, one request each
    (Kittiwake: OpenCode's ``POST /session/{id}/message``, answered when the turn ended;
    a floor level: its prompt route alone, which already waits for the provider)."""
    for _ in range(n):
        if one and kittiwake:
            await client.post(f"/session/{sid}/message", _V1_PROMPT_BODY)
            continue
        await client.post(f"/api/session/{sid}/prompt", _PROMPT_BODY)
        if not one:
            await client.post(f"/api/session/{sid}/wait")


async def _warm(level: str, mock: str, args: argparse.Namespace) -> Warm:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(
                partial(trio.run_process, _argv(level, port, tmp, mock), check=False,
                        stdout=subprocess.DEVNULL, env=_WARM_ENV)
            )  # fmt: skip
            try:
                await wait_healthy(url, time.perf_counter() + 60)
                one, kittiwake = args.one_request, level == "kittiwake"
                send = partial(_prompts, kittiwake=kittiwake, one=one)
                sids = [await _session(url, level, one) for _ in range(args.concurrent)]
                first = await LeanClient.open(url)
                await send(first, sids[0], 20)  # warm-up
                cpu = cpu_seconds(proc.pid)
                await send(first, sids[0], args.sequential)
                sequential = (cpu_seconds(proc.pid) - cpu) / args.sequential
                # opened now: an idle keep-alive connection is closed after 5 s
                clients = [first] + [await LeanClient.open(url) for _ in sids[1:]]
                each = max(1, args.sequential // len(sids))
                cpu, start = cpu_seconds(proc.pid), time.perf_counter()
                async with trio.open_nursery() as burst:
                    for client, sid in zip(clients, sids, strict=True):
                        burst.start_soon(send, client, sid, each)
                took, total = time.perf_counter() - start, each * len(sids)
                concurrent = (cpu_seconds(proc.pid) - cpu) / total
                for client in clients:
                    await client.aclose()
                return Warm(sequential, concurrent, total / took)
            finally:
                proc.terminate()


async def _cold(level: str, mock: str) -> Cold:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        if level == "kittiwake":
            argv = [sys.executable, "-m", "gateway", "serve", "--port", str(port)]
        else:
            argv = _argv(level, port, tmp, mock)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "KITTIWAKE_DATA_DIR": tmp}
        devnull = os.open(os.devnull, os.O_WRONLY)
        async with trio.open_nursery() as nursery:
            start = time.perf_counter()
            proc = await nursery.start(
                partial(trio.run_process, argv, check=False, env=env, cwd=ROOT,
                        stdout=devnull, stderr=devnull)
            )  # fmt: skip
            try:
                ready = await _first_200(f"http://127.0.0.1:{port}", start + 60)
                cpu = cpu_seconds(proc.pid)
                await trio.sleep(1.0)
                return Cold(ready - start, cpu, _status(proc.pid, "VmRSS") / 1024)
            finally:
                proc.terminate()
                os.close(devnull)


async def _measure(args: argparse.Namespace) -> None:
    from bench._lean import mock_openai

    levels = [level for level in args.levels.split(",") if level]
    warm: dict[str, list[Warm]] = {level: [] for level in levels}
    cold: dict[str, list[Cold]] = {level: [] for level in levels}
    mock_port = free_port()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(mock_openai, mock_port)
        mock = f"http://127.0.0.1:{mock_port}"
        for round_ in range(args.rounds):
            order = levels if round_ % 2 == 0 else levels[::-1]
            for level in order:
                warm[level].append(await _warm(level, mock, args))
                cold[level] += [await _cold(level, mock) for _ in range(args.cold)]
            print(f"round {round_ + 1} done ({os.getloadavg()[0]:.1f} load)", flush=True)
        nursery.cancel_scope.cancel()

    def med(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    print(f"\n{'level':<10} {'CPU/prompt seq':>15} {'at once':>9} {'prompts/s':>10} "
          f"{'cold start':>11} {'CPU by 200':>11} {'idle RSS':>9}")  # fmt: skip
    for level in levels:
        w, c = warm[level], cold[level]
        print(
            f"{level:<10} {med([x.sequential for x in w]) * 1000:>12.2f} ms "
            f"{med([x.concurrent for x in w]) * 1000:>6.2f} ms {med([x.rate for x in w]):>10.0f} "
            f"{med([x.wall for x in c]):>9.3f} s {med([x.cpu for x in c]):>9.3f} s "
            f"{med([x.rss for x in c]):>5.1f} MiB",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", nargs=4, metavar=("LEVEL", "PORT", "DATA_DIR", "MOCK"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sequential", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--cold", type=int, default=3)
    parser.add_argument("--levels", default=",".join(LEVELS))
    parser.add_argument("--one-request", action="store_true")
    args = parser.parse_args()
    if args.serve:
        gc.disable()  # as ``kittiwake serve``: paused for start-up, settled once serving
        level, port, data_dir, mock = args.serve
        trio.run(_serve_floor, level, int(port), data_dir, mock)
    else:
        trio.run(_measure, args)


if __name__ == "__main__":
    main()
