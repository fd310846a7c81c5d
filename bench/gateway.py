"""Gateway latency and throughput over real HTTP, cold start, idle memory.

Run: .venv/bin/python bench/gateway.py [--sequential 50] [--concurrent 20] [--rounds 5]

The server runs in a child process (this file with ``--serve``): a runtime on a temporary
DuckDB store whose provider is a zero-latency ``ScriptedLLM``. The client (httpx, one
keep-alive pool) measures, end to end, ``POST /prompt`` followed by ``POST /wait`` (the
answer is durable when ``wait`` returns):

- one warm session, N sequential prompts: median and p95 latency, prompts/s;
- M sessions prompted at once, R rounds: prompts/s;
- cold start: ``kittiwake serve`` in a fresh process until the first 200 from /api/health;
- idle RSS of that process after startup.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parents[1]


async def _serve(port: int, data_dir: str) -> None:
    from gateway import serve
    from runtime import open_runtime
    from runtime.llm import ScriptedLLM, StepFinish, StepStart, TextDelta, TextEnd, TextStart, Usage

    script = [
        StepStart(), TextStart(id="t"), TextDelta(id="t", delta="ok"), TextEnd(id="t"),
        StepFinish(finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=1)),
    ]  # fmt: skip
    llm = ScriptedLLM(lambda request: script)
    async with open_runtime(data_dir=data_dir, llm=llm) as rt:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(partial(serve, rt, "127.0.0.1", port))
            print(server.url, flush=True)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_healthy(url: str, deadline: float) -> float:
    async with httpx.AsyncClient() as client:
        while True:
            try:
                if (await client.get(url + "/api/health")).status_code == 200:
                    return time.perf_counter()
            except httpx.TransportError:
                pass
            if time.perf_counter() > deadline:
                raise TimeoutError(url)
            await trio.sleep(0.005)


async def _prompt(client: httpx.AsyncClient, sid: str) -> float:
    start = time.perf_counter()
    r = await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "hi"}})
    r.raise_for_status()
    (await client.post(f"/api/session/{sid}/wait")).raise_for_status()
    return time.perf_counter() - start


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _measure(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        cmd = [sys.executable, __file__, "--serve", str(port), tmp]
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(partial(trio.run_process, cmd, check=False))
            url = f"http://127.0.0.1:{port}"
            await _wait_healthy(url, time.perf_counter() + 30)
            limits = httpx.Limits(max_connections=args.concurrent + 5)
            async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
                sid = (await client.post("/api/session", json={})).json()["data"]["id"]
                for _ in range(5):
                    await _prompt(client, sid)
                seq = [await _prompt(client, sid) for _ in range(args.sequential)]
                seq.sort()
                p95 = seq[min(len(seq) - 1, int(len(seq) * 0.95))]
                med = statistics.median(seq)
                print(f"sequential: median {med * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
                      f"{len(seq) / sum(seq):.1f} prompts/s")  # fmt: skip
                sids = [
                    (await client.post("/api/session", json={})).json()["data"]["id"]
                    for _ in range(args.concurrent)
                ]
                rates = []
                for _ in range(args.rounds):
                    start = time.perf_counter()
                    async with trio.open_nursery() as inner:
                        for s in sids:
                            inner.start_soon(_prompt, client, s)
                    rates.append(len(sids) / (time.perf_counter() - start))
                print(f"{args.concurrent} at once: median {statistics.median(rates):.1f} prompts/s "
                      f"over {args.rounds} rounds")  # fmt: skip
            proc.terminate()

    colds, rss = [], []
    for _ in range(args.cold):
        with tempfile.TemporaryDirectory() as tmp:
            port = _free_port()
            env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "KITTIWAKE_DATA_DIR": tmp}
            kittiwake = [sys.executable, "-m", "gateway.cli", "serve", "--port", str(port)]
            async with trio.open_nursery() as nursery:
                start = time.perf_counter()
                proc = await nursery.start(
                    partial(trio.run_process, kittiwake, check=False, env=env, cwd=ROOT,
                            stdout=trio.lowlevel.FdStream(os.open(os.devnull, os.O_WRONLY)),
                            stderr=trio.lowlevel.FdStream(os.open(os.devnull, os.O_WRONLY)))
                )  # fmt: skip
                ready = await _wait_healthy(f"http://127.0.0.1:{port}", start + 30)
                colds.append(ready - start)
                await trio.sleep(1.0)
                rss.append(_rss_mb(proc.pid))
                proc.terminate()
    print(f"cold start to first 200: median {statistics.median(colds):.2f} s over {len(colds)}")
    print(f"idle RSS after start: median {statistics.median(rss):.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "DATA_DIR"))
    parser.add_argument("--sequential", type=int, default=50)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cold", type=int, default=3)
    args = parser.parse_args()
    if args.serve:
        sys.path.insert(0, str(ROOT))
        try:
            trio.run(_serve, int(args.serve[0]), args.serve[1])
        except KeyboardInterrupt:
            pass
        return
    trio.run(_measure, args)


if __name__ == "__main__":
    main()
