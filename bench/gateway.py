"""Gateway latency and throughput over real HTTP, cold start, idle memory.

Run: .venv/bin/python bench/gateway.py [--sequential 50] [--concurrent 20] [--rounds 5]
                                       [--runs 3] [--cold 5] [--telemetry] [--pairs 0]
                                       [--opencode] [--tree PATH] [--serve-config JSON]

Every server is a child process (this file with ``--serve``): a runtime on a temporary
DuckDB store served by Hypercorn's trio worker, its cyclic collector paused until it accepts
and then settled as ``kittiwake serve`` settles it. Two providers are measured:

- ``openai``: a zero-latency local OpenAI-compatible mock, a real (minimal) HTTP/1.1
  server on trio in its own child process (this file with ``--mock-openai``) answering
  every ``POST /v1/chat/completions`` with one streamed chat-completions SSE answer. The runtime
  reaches it through the real ``ProviderClient`` (httpx), configured as a config-only
  ``@ai-sdk/openai-compatible`` provider. This is the benchmark's definition; its figures
  are the headline.
- ``scripted``: the same answer from an in-process ``ScriptedLLM``, so the provider hop's
  cost is visible as the difference.

The client measures, end to end, ``POST /prompt`` followed by ``POST /wait`` (the answer
is durable when ``wait`` returns). The headline client is a minimal keep-alive HTTP/1.1
client (``LeanClient``, one connection per session), as wrk-style load generators are,
because it shares the two cores with the server; the ``openai`` provider is measured again
with httpx (one keep-alive pool), whose CPU per prompt is printed beside it:

- one warm session, N sequential prompts: median and p95 latency, prompts/s, and the
  server's CPU per prompt (every thread, from ``/proc``);
- M sessions prompted at once, R rounds after a warm-up round: prompts/s (median of the
  rounds) and the server's CPU per prompt over them;
- a websocket variant (``openai`` provider): one ``/api/ws`` connection subscribed to the
  session sends a ``prompt`` frame and waits for the answering durable
  ``session.next.step.ended`` event on the same connection;
- cold start: ``kittiwake serve`` in a fresh process until the first 200 from /api/health,
  and the CPU the process used by then (every thread, from ``/proc``: steadier than the
  wall time on a shared machine);
- idle RSS and threads of that process one second after startup, how much of that RSS is
  anonymous memory (``RssAnon``) and how much DuckDB's shared library (its pages mapped,
  from ``/proc/<pid>/smaps``). ``--tree PATH`` starts these servers from another checkout
  (its directory first on the path, with this environment's packages) to compare two
  trees with one benchmark; ``--serve-config JSON`` hands them a configuration
  (``KITTIWAKE_CONFIG_CONTENT``, e.g. ``{"telemetry": {"enabled": false}}``).

Warm figures are the median over ``--runs`` fresh servers. ``--opencode`` measures ``opencode
serve --pure`` 1.18.33 (``bench/_opencode.py``, offline; ``make opencode``) on the same mock in
each run, after Kittiwake's servers, with the same lean client through its V1 routes (``POST
/session``, then ``POST /session/{id}/message``, which answers when the turn has ended); its
CPU is its processes'. Its first prompt in a session also asks for a title: the warm-up
prompts and round take those.

``--pairs N`` measures telemetry's overhead instead: N pairs of fresh servers, telemetry
off and on (``KITTIWAKE_BENCH_SAMPLE``, else the default sampling) in alternating order,
each measured on the lean client's sequential and concurrent series (both providers) and
the single requests; besides latency and prompts/s, the server's CPU (every thread, from
``/proc``) per prompt over both series. Each figure is reported as medians and the median
paired overhead (``bench/_pairs.py``).
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
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import msgspec
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._lean import (  # noqa: E402 - after the path is set
    MAX_REQUEST,
    MOCK_MODEL,
    LeanClient,
    cpu_of,
    cpu_seconds,
    descendants,
    free_port,
    mock_openai,
    wait_healthy,
)

STEP_ENDED = "session.next.step.ended"


# -- the zero-latency OpenAI-compatible mock -------------------------------------------------


# -- the served runtime ----------------------------------------------------------------------


async def _serve(port: int, data_dir: str, provider: str) -> None:
    """Serve a runtime as ``kittiwake serve`` does, its collector included: paused from
    the process's start (``main``), settled once the server accepts."""
    import gateway
    from gateway import serve
    from runtime import ModelRef, open_runtime
    from runtime import llm as llm_package

    options: dict[str, Any] = {}
    if os.environ.get("KITTIWAKE_BENCH_TELEMETRY"):
        from storage import TelemetryOptions

        sample = float(os.environ.get("KITTIWAKE_BENCH_SAMPLE", TelemetryOptions().sample))
        options["telemetry"] = TelemetryOptions(sample=sample)
    http: httpx.AsyncClient | None = None
    if provider == "scripted":
        script: list[llm_package.LLMEvent] = [
            llm_package.StepStart(), llm_package.TextStart(id="t"),
            llm_package.TextDelta(id="t", delta="ok"), llm_package.TextEnd(id="t"),
            llm_package.StepFinish(
                finish_reason="stop", usage=llm_package.Usage(input_tokens=1, output_tokens=1)
            ),
        ]  # fmt: skip
        llm: Any = llm_package.ScriptedLLM(lambda request: script, event_checkpoints=False)
    else:
        config = {
            "provider": {
                "mock": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Local mock",
                    "options": {"baseURL": provider + "/v1", "apiKey": "mock-key"},
                    "models": {MOCK_MODEL: {"limit": {"context": 131072, "output": 4096}}},
                }
            }
        }
        catalog = llm_package.Catalog.from_models_dev({}).with_config(config)
        http = llm_package.provider_http_client()
        llm = llm_package.ProviderClient(catalog, llm_package.Auth(env={}), http_client=http)
        options["default_model"] = ModelRef(id=MOCK_MODEL, provider_id="mock")
    try:
        async with open_runtime(data_dir=data_dir, llm=llm, **options) as rt:
            async with trio.open_nursery() as nursery:
                server = await nursery.start(partial(serve, rt, "127.0.0.1", port))
                _settle_collector(gateway)
                print(server.url, flush=True)
    finally:
        if http is not None:
            await http.aclose()


def _settle_collector(gateway: Any) -> None:
    """What ``kittiwake serve`` does with the collector once accepting: the served tree's
    ``settle_collector``, or (a tree from before it) freeze start-up's objects and resume."""
    settle = getattr(gateway, "settle_collector", None)
    if settle is not None:
        settle(serving=True)
    else:
        gc.freeze()
        gc.enable()


# -- measuring -------------------------------------------------------------------------------


@asynccontextmanager
async def _child(argv: list[str], url: str, path: str) -> AsyncIterator[int]:
    """Run this file with *argv* in a child process until it answers *path*; yield its pid
    and stop it on exit."""
    async with trio.open_nursery() as nursery:
        proc = await nursery.start(
            partial(
                trio.run_process, [sys.executable, __file__, *argv], check=False,
                stdout=subprocess.DEVNULL,
            )
        )  # fmt: skip
        try:
            await wait_healthy(url, time.perf_counter() + 30, path)
            yield proc.pid
        finally:
            proc.terminate()


_PROMPT_BODY = msgspec.json.encode({"prompt": {"text": "hi"}})


_V1_PROMPT_BODY = msgspec.json.encode({"parts": [{"type": "text", "text": "hi"}]})


async def _prompt(client: httpx.AsyncClient | LeanClient, sid: str, v1: bool = False) -> float:
    """One prompt, end to end: ``POST /prompt`` then ``POST /wait`` (*v1*: OpenCode's ``POST
    /session/{id}/message``, lean client only); seconds taken."""
    start = time.perf_counter()
    if v1 and isinstance(client, LeanClient):
        await client.post(f"/session/{sid}/message", _V1_PROMPT_BODY)
        return time.perf_counter() - start
    if isinstance(client, LeanClient):
        await client.post(f"/api/session/{sid}/prompt", _PROMPT_BODY)
        await client.post(f"/api/session/{sid}/wait")
        return time.perf_counter() - start
    r = await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "hi"}})
    r.raise_for_status()
    (await client.post(f"/api/session/{sid}/wait")).raise_for_status()
    return time.perf_counter() - start


async def _check_answered(client: httpx.AsyncClient, sid: str) -> None:
    """Fail unless the session's newest message is the provider's "ok" answer."""
    newest = (await client.get(f"/api/session/{sid}/message", params={"limit": 1})).json()
    message = newest["data"][0]
    texts = [p.get("text") for p in message.get("content", [])]
    if message["type"] != "assistant" or message.get("finish") != "stop" or texts != ["ok"]:
        raise RuntimeError(f"the prompts were not answered: {message}")


class Series(msgspec.Struct, kw_only=True):
    median: float
    p95: float
    rate: float
    concurrent: float | None = None
    client_cpu: float | None = None  # the client's own CPU seconds per sequential prompt
    server_cpu: float | None = None  # the server's CPU seconds per prompt, sequential
    server_cpu_concurrent: float | None = None  # the same, sessions at once


def _summary(samples: list[float]) -> Series:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return Series(median=statistics.median(ordered), p95=p95, rate=len(ordered) / sum(ordered))


async def _http_series(
    url: str, args: argparse.Namespace, lean: bool, pids: list[int] | None = None,
    v1: bool = False,
) -> Series:  # fmt: skip
    """Sequential and concurrent prompts over HTTP, with the lean client (one connection
    per session) or with httpx (one keep-alive pool); the CPU of *pids* (the server's
    processes) per prompt when given. *v1*: OpenCode's routes (``POST /session``, ``POST
    /session/{id}/message``, which answers when the turn has ended)."""
    pids = pids or []
    limits = httpx.Limits(max_connections=args.concurrent + 5)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        sids = [
            (await client.post("/session", json={})).json()["id"]
            if v1 else (await client.post("/api/session", json={})).json()["data"]["id"]
            for _ in range(args.concurrent)
        ]  # fmt: skip
        clients: list[httpx.AsyncClient | LeanClient] = [client] * len(sids)
        prompt = partial(_prompt, v1=v1)
        if lean:  # the others' connections open after the sequential series: an idle
            clients = [await LeanClient.open(url)]  # one longer than keep-alive is closed
        try:
            for _ in range(5):
                await prompt(clients[0], sids[0])
            cpu, served = time.process_time(), cpu_of(pids)
            series = _summary([await prompt(clients[0], sids[0]) for _ in range(args.sequential)])
            series.client_cpu = (time.process_time() - cpu) / args.sequential
            series.server_cpu = (cpu_of(pids) - served) / args.sequential
            if not v1:
                await _check_answered(client, sids[0])
            if lean:
                clients += [await LeanClient.open(url) for _ in sids[1:]]
            async with trio.open_nursery() as inner:  # each session's first prompt (a title)
                for c, s in zip(clients, sids, strict=True):
                    inner.start_soon(prompt, c, s)
            rates, served = [], cpu_of(pids)
            for _ in range(args.rounds):
                start = time.perf_counter()
                async with trio.open_nursery() as inner:
                    for c, s in zip(clients, sids, strict=True):
                        inner.start_soon(prompt, c, s)
                rates.append(len(sids) / (time.perf_counter() - start))
            series.concurrent = statistics.median(rates)
            series.server_cpu_concurrent = (cpu_of(pids) - served) / (len(sids) * args.rounds)
        finally:
            for c in clients if lean else []:
                await c.aclose()
        return series


async def _ws_series(url: str, args: argparse.Namespace) -> Series:
    from trio_websocket import open_websocket_url

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        sid = (await client.post("/api/session", json={})).json()["data"]["id"]
    ws_url = url.replace("http://", "ws://") + "/api/ws"
    async with open_websocket_url(ws_url, max_message_size=MAX_REQUEST) as ws:
        ref = 0

        async def until(match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
            while True:
                frame: dict[str, Any] = msgspec.json.decode(await ws.get_message())
                if frame.get("type") == "reply" and "error" in frame:
                    raise RuntimeError(frame["error"])
                if match(frame):
                    return frame

        async def prompt() -> float:
            # The reply and the turn's events travel on different tasks of the server, so
            # the step's end may arrive before the reply that names the admitted seq.
            nonlocal ref
            ref += 1
            mine = ref
            start = time.perf_counter()
            await ws.send_message(
                msgspec.json.encode(
                    {"type": "prompt", "ref": mine, "sessionID": sid, "prompt": {"text": "hi"}}
                ).decode()
            )
            admitted: int | None = None
            ended: list[int] = []
            while admitted is None or not any(seq > admitted for seq in ended):
                frame = await until(lambda f: f.get("type") in ("reply", "event"))
                if frame["type"] == "reply" and frame.get("ref") == mine:
                    admitted = frame["data"]["admittedSeq"]
                elif frame["type"] == "event" and frame["event"]["type"] == STEP_ENDED:
                    ended.append(frame["seq"])
            return time.perf_counter() - start

        ref += 1
        await ws.send_message(
            msgspec.json.encode({"type": "subscribe", "ref": ref, "sessionID": sid}).decode()
        )
        subscribed = ref
        await until(lambda f: f.get("type") == "reply" and f.get("ref") == subscribed)
        for _ in range(5):
            await prompt()
        cpu = time.process_time()
        series = _summary([await prompt() for _ in range(args.sequential)])
        series.client_cpu = (time.process_time() - cpu) / args.sequential
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        await _check_answered(client, sid)
    return series


async def _request_costs(url: str, pid: int, n: int) -> dict[str, tuple[float, float]]:
    """Median latency and server CPU of single requests: the per-prompt routes, the same
    ``wait`` sent chunked (no content-length), and a session read."""

    async def chunked() -> AsyncIterator[bytes]:
        yield b""

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        sid = (await client.post("/api/session", json={})).json()["data"]["id"]
        kinds: dict[str, Callable[[], Any]] = {
            "GET /api/health": lambda: client.get("/api/health"),
            "POST /wait, idle session": lambda: client.post(f"/api/session/{sid}/wait"),
            "POST /wait, chunked": lambda: client.post(
                f"/api/session/{sid}/wait", content=chunked()
            ),
            "GET /api/session/{id}": lambda: client.get(f"/api/session/{sid}"),
        }
        out: dict[str, tuple[float, float]] = {}
        for name, send in kinds.items():
            for _ in range(20):
                (await send()).raise_for_status()
            samples = []
            cpu = cpu_seconds(pid)
            for _ in range(n):
                start = time.perf_counter()
                (await send()).raise_for_status()
                samples.append(time.perf_counter() - start)
            out[name] = (statistics.median(samples), (cpu_seconds(pid) - cpu) / n)
        return out


def _status(pid: int, field: str) -> int:
    """A number of ``/proc/<pid>/status`` (*field* ``VmRSS`` is in KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(field)


def _library_mib(pid: int) -> float:
    """MiB of DuckDB's shared library (``_duckdb*.so``) resident in process *pid*."""
    kib, duckdb = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        first = line.split(maxsplit=1)[0]
        if "-" in first and not first.endswith(":"):  # a mapping's header line
            duckdb = "/_duckdb" in line
        elif duckdb and first == "Rss:":
            kib += int(line.split()[1])
    return kib / 1024


async def _first_200(url: str, deadline: float) -> float:
    """When ``GET /api/health`` first answers 200: one raw HTTP/1.1 request per attempt,
    every 5 ms, a refused or reset connection retried.

    Each attempt costs microseconds of CPU. An httpx client's failed attempts (and its SSL
    context, built once) cost milliseconds of the two cores the starting server needs.
    """
    host, port = url.removeprefix("http://").split(":")
    request = f"GET /api/health HTTP/1.1\r\nhost: {host}:{port}\r\n\r\n".encode()
    while True:
        try:
            async with await trio.open_tcp_stream(host, int(port)) as stream:
                await stream.send_all(request)
                head = b""
                while b"\r\n" not in head and (data := await stream.receive_some(4096)):
                    head += data
            if head.startswith(b"HTTP/1.1 200"):
                return time.perf_counter()
        except OSError:
            pass
        if time.perf_counter() > deadline:
            raise TimeoutError(url)
        await trio.sleep(0.005)


class Cold(msgspec.Struct):
    """One fresh ``kittiwake serve``: seconds to its first 200, CPU seconds used by then,
    MiB resident (of it anonymous, and DuckDB's library) and threads one second later."""

    wall: float
    cpu: float
    rss: float
    anonymous: float
    library: float
    threads: int


async def _cold(args: argparse.Namespace) -> list[Cold]:
    starts: list[Cold] = []
    for _ in range(args.cold):
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "KITTIWAKE_DATA_DIR": tmp}
            tree = args.tree or ROOT
            if args.tree is not None:
                env["PYTHONPATH"] = str(tree)
            if args.serve_config is not None:
                env["KITTIWAKE_CONFIG_CONTENT"] = args.serve_config
            kittiwake = [sys.executable, "-m", "gateway", "serve", "--port", str(port)]
            async with trio.open_nursery() as nursery:
                start = time.perf_counter()
                proc = await nursery.start(
                    partial(trio.run_process, kittiwake, check=False, env=env, cwd=tree,
                            stdout=trio.lowlevel.FdStream(os.open(os.devnull, os.O_WRONLY)),
                            stderr=trio.lowlevel.FdStream(os.open(os.devnull, os.O_WRONLY)))
                )  # fmt: skip
                ready = await _first_200(f"http://127.0.0.1:{port}", start + 30)
                cpu = cpu_seconds(proc.pid)
                await trio.sleep(1.0)
                rss, threads = _status(proc.pid, "VmRSS") / 1024, _status(proc.pid, "Threads")
                anonymous = _status(proc.pid, "RssAnon") / 1024
                library = _library_mib(proc.pid)
                starts.append(Cold(ready - start, cpu, rss, anonymous, library, threads))
                proc.terminate()
    return starts


def _print_series(label: str, runs: list[Series]) -> None:
    def med(pick: Callable[[Series], float | None]) -> float:
        return statistics.median(v for v in map(pick, runs) if v is not None)

    line = (
        f"{label:<28} sequential: median {med(lambda s: s.median) * 1000:5.1f} ms, "
        f"p95 {med(lambda s: s.p95) * 1000:5.1f} ms, {med(lambda s: s.rate):6.1f} prompts/s"
    )
    if runs[0].concurrent is not None:
        line += f"; at once: {med(lambda s: s.concurrent):6.1f} prompts/s"
    if runs[0].client_cpu is not None:
        line += f"; client CPU {med(lambda s: s.client_cpu) * 1000:.1f} ms/prompt"
    if runs[0].server_cpu is not None:
        line += f"; server CPU {med(lambda s: s.server_cpu) * 1000:.2f} ms/prompt"
    if runs[0].server_cpu_concurrent is not None:
        line += f" ({med(lambda s: s.server_cpu_concurrent) * 1000:.2f} at once)"
    per_run = ", ".join(f"{s.median * 1000:.1f}" for s in runs)
    print(f"{line}  (run medians ms: {per_run})", flush=True)


async def _measure(args: argparse.Namespace) -> None:
    print(f"{args.runs} run(s): {args.sequential} sequential prompts, {args.concurrent} "
          f"sessions at once x {args.rounds} rounds", flush=True)  # fmt: skip
    results: dict[str, list[Series]] = {
        "openai": [], "v1": [], "httpx": [], "ws": [], "scripted": [], "opencode": []
    }  # fmt: skip
    costs: list[dict[str, tuple[float, float]]] = []
    for _ in range(args.runs):
        mock_port = free_port()
        mock = f"http://127.0.0.1:{mock_port}"
        async with _child(["--mock-openai", str(mock_port)], mock, "/"):
            for provider in ("openai", "scripted"):
                with tempfile.TemporaryDirectory() as tmp:
                    port = free_port()
                    url = f"http://127.0.0.1:{port}"
                    which = mock if provider == "openai" else "scripted"
                    argv = ["--serve", str(port), tmp, which]
                    async with _child(argv, url, "/api/health") as pid:
                        results[provider].append(
                            await _http_series(url, args, lean=True, pids=[pid])
                        )
                        if provider == "openai":
                            results["v1"].append(
                                await _http_series(url, args, lean=True, pids=[pid], v1=True)
                            )
                            if args.httpx:
                                results["httpx"].append(
                                    await _http_series(url, args, lean=False, pids=[pid])
                                )
                            results["ws"].append(await _ws_series(url, args))
                            costs.append(await _request_costs(url, pid, args.requests))
            if args.opencode:
                results["opencode"].append(await _opencode_series(mock_port, args))
    if args.runs:
        _print_series("HTTP, OpenAI-compatible mock", results["openai"])
        _print_series("same, V1 route (1 request)", results["v1"])
        if args.httpx:
            _print_series("same, httpx client", results["httpx"])
        _print_series("websocket, same mock", results["ws"])
        _print_series("HTTP, in-process ScriptedLLM", results["scripted"])
        if args.opencode:
            _print_series("OpenCode 1.18.33, same mock", results["opencode"])
    if costs:
        print(f"one request, {args.requests} times (median latency, server CPU per request):")
        for name in costs[0]:
            latency = statistics.median(c[name][0] for c in costs) * 1000
            cpu = statistics.median(c[name][1] for c in costs) * 1000
            print(f"  {name:<40} {latency:5.2f} ms, server CPU {cpu:4.2f} ms")
    if args.cold:
        starts = await _cold(args)
        per_run = ", ".join(f"{c.wall:.2f}" for c in starts)
        cpus = ", ".join(f"{c.cpu:.2f}" for c in starts)
        print(f"cold start to first 200: median {statistics.median(c.wall for c in starts):.2f} s "
              f"over {len(starts)} ({per_run}); CPU by then: median "
              f"{statistics.median(c.cpu for c in starts):.2f} s ({cpus})")  # fmt: skip
        print(f"idle RSS after start: median {statistics.median(c.rss for c in starts):.1f} MiB "
              f"({', '.join(f'{c.rss:.1f}' for c in starts)}), of it anonymous "
              f"{statistics.median(c.anonymous for c in starts):.1f} MiB "
              f"({', '.join(f'{c.anonymous:.1f}' for c in starts)}), DuckDB's library "
              f"{statistics.median(c.library for c in starts):.1f} MiB; "
              f"{statistics.median(c.threads for c in starts):.0f} threads")  # fmt: skip


async def _opencode_series(mock_port: int, args: argparse.Namespace) -> Series:
    """``opencode serve --pure`` (``bench/_opencode.py``) on the same mock, measured as the
    lean client's series through its V1 routes; its CPU is its processes'. Each session's
    first prompt (which also asks the model for a title) is left out of the figures."""
    sys.path.insert(0, str(ROOT))
    from bench._opencode import OpenCodeServe

    with tempfile.TemporaryDirectory() as tmp:
        serve = OpenCodeServe(Path(tmp), mock_port, (MOCK_MODEL,))
        try:
            await trio.to_thread.run_sync(serve.start)
            assert serve.process is not None
            pids = [serve.process.pid, *descendants(serve.process.pid)]
            return await _http_series(serve.url, args, lean=True, pids=pids, v1=True)
        finally:
            await trio.to_thread.run_sync(serve.stop)


async def _one_side(args: argparse.Namespace, telemetry: bool) -> dict[str, float]:
    """One server per provider with telemetry *telemetry*: the figures ``--pairs`` compares."""
    if telemetry:  # the served children read it
        os.environ["KITTIWAKE_BENCH_TELEMETRY"] = "1"
    else:
        os.environ.pop("KITTIWAKE_BENCH_TELEMETRY", None)
    figures: dict[str, float] = {}
    mock_port = free_port()
    mock = f"http://127.0.0.1:{mock_port}"
    async with _child(["--mock-openai", str(mock_port)], mock, "/"):
        for provider in ("openai", "scripted"):
            with tempfile.TemporaryDirectory() as tmp:
                port = free_port()
                url = f"http://127.0.0.1:{port}"
                argv = ["--serve", str(port), tmp, mock if provider == "openai" else "scripted"]
                async with _child(argv, url, "/api/health") as pid:
                    cpu = cpu_seconds(pid)
                    series = await _http_series(url, args, lean=True)
                    prompts = 5 + args.sequential + args.concurrent * args.rounds
                    label = "OpenAI-compatible mock" if provider == "openai" else "ScriptedLLM"
                    figures[f"{label}, server CPU per prompt"] = (cpu_seconds(pid) - cpu) / prompts
                    figures[f"{label}, sequential median"] = series.median
                    figures[f"{label}, {args.concurrent} at once (prompts/s)"] = (
                        series.concurrent or 0.0
                    )
                    if provider == "openai":
                        costs = await _request_costs(url, pid, args.requests)
                        for name, (_, server_cpu) in costs.items():
                            figures[f"server CPU, {name}"] = server_cpu
    return figures


async def _pairs(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    from bench._pairs import first_is_off, pair_report

    sides: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for pair in range(args.pairs):
        for telemetry in (False, True) if first_is_off(pair) else (True, False):
            sides[telemetry].append(await _one_side(args, telemetry))
        print(f"pair {pair + 1} of {args.pairs} done", flush=True)
    for name in sides[False][0]:
        off = [run[name] for run in sides[False]]
        on = [run[name] for run in sides[True]]
        rate = name.endswith("(prompts/s)")
        print(pair_report(name, off, on, unit="/s" if rate else "ms",
                          scale=1.0 if rate else 1000.0, higher_is_better=rate))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", nargs=3, metavar=("PORT", "DATA_DIR", "PROVIDER"))
    parser.add_argument("--mock-openai", type=int, metavar="PORT")
    parser.add_argument("--sequential", type=int, default=50)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument(
        "--httpx", action=argparse.BooleanOptionalAction, default=True,
        help="the httpx client's series (one pool: at hundreds of sessions a connection it "
        "kept past the server's 5 s keep-alive can meet the server closing it)",
    )  # fmt: skip
    parser.add_argument(
        "--telemetry", action="store_true", help="served runtimes record spans (telemetry on)"
    )
    parser.add_argument(
        "--pairs", type=int, default=0, help="telemetry off / on pairs (overhead, see above)"
    )
    parser.add_argument(
        "--tree", type=Path, help="start the cold-start servers from this checkout instead"
    )
    parser.add_argument(
        "--serve-config",
        help="configuration JSON of the cold-start servers (KITTIWAKE_CONFIG_CONTENT)",
    )
    parser.add_argument(
        "--opencode", action="store_true",
        help="also measure opencode serve (1.18.33, make opencode) on the same mock, each run",
    )  # fmt: skip
    args = parser.parse_args()
    if args.telemetry:  # the served children read it
        os.environ["KITTIWAKE_BENCH_TELEMETRY"] = "1"
    try:
        if args.mock_openai:
            trio.run(mock_openai, args.mock_openai)
        elif args.pairs:
            trio.run(_pairs, args)
        elif args.serve:
            gc.disable()  # as the kittiwake launcher does, until the server accepts
            # The runtime of another checkout when asked (bench/profile.py --tree).
            sys.path.insert(0, os.environ.get("KITTIWAKE_BENCH_TREE") or str(ROOT))
            trio.run(_serve, int(args.serve[0]), args.serve[1], args.serve[2])
        else:
            trio.run(_measure, args)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
