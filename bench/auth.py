"""The cost of authentication per request: no auth, HTTP basic auth, a bearer token.

Run: .venv/bin/python bench/auth.py [--requests 500] [--runs 3]

For each mode a fresh ``kittiwake serve`` child process (a temporary DuckDB data dir) is
measured by one keep-alive HTTP/1.1 connection sending ``--requests`` sequential requests
after a warm-up, on two routes: ``GET /api/health`` (the lightest route) and
``GET /api/session?limit=1`` (a session read). Printed per mode and
route: the median and p95 latency, and the server's CPU per request (every thread, from
``/proc``). A token's first request verifies its scrypt hash (tens of ms, once per process):
it is printed apart, as ``first``. Each figure is the median over ``--runs`` fresh servers.

First, the gate alone (``Access.admit``, in this process on a real DuckDB store): the
microseconds one request's authentication costs in each mode, steady on a loaded machine
where the end-to-end latencies are not, and the first request of a token (its scrypt
verification).
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._lean import cpu_of, descendants, free_port, wait_healthy  # noqa: E402

PASSWORD = "bench-password"
ROUTES = ("/api/health", "/api/session?limit=1")


class _Getter:
    """GETs over one keep-alive connection with a fixed ``Authorization``; content-length
    framed answers (every route measured here answers so)."""

    def __init__(self, stream: trio.SocketStream, host: str, auth: str | None) -> None:
        self._stream = stream
        self._head = f"host: {host}\r\n" + (f"authorization: {auth}\r\n" if auth else "")
        self._buffer = bytearray()

    async def get(self, path: str) -> None:
        await self._stream.send_all(f"GET {path} HTTP/1.1\r\n{self._head}\r\n".encode())
        buffer = self._buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            buffer += await self._stream.receive_some(65536)
        head = bytes(buffer[:end]).lower()
        del buffer[: end + 4]
        length = int(head.partition(b"\r\ncontent-length:")[2].split(b"\r\n", 1)[0])
        while len(buffer) < length:
            buffer += await self._stream.receive_some(65536)
        del buffer[:length]
        if not head.startswith(b"http/1.1 200"):
            raise RuntimeError(f"{path}: {head[:40]!r}")


async def _measure(url: str, auth: str | None, requests: int, pids: list[int]) -> dict[str, float]:
    host, port = url.removeprefix("http://").split(":")
    stream = await trio.open_tcp_stream(host, int(port))
    client = _Getter(stream, f"{host}:{port}", auth)
    out: dict[str, float] = {}
    started = time.perf_counter()
    await client.get(ROUTES[0])
    out["first"] = (time.perf_counter() - started) * 1000
    for route in ROUTES:
        for _ in range(50):
            await client.get(route)
        times: list[float] = []
        cpu = cpu_of(pids)
        for _ in range(requests):
            started = time.perf_counter()
            await client.get(route)
            times.append((time.perf_counter() - started) * 1000)
        out[f"{route} cpu"] = (cpu_of(pids) - cpu) * 1000 / requests
        times.sort()
        out[f"{route} median"] = statistics.median(times)
        out[f"{route} p95"] = times[int(len(times) * 0.95)]
    await stream.aclose()
    return out


async def _run(mode: str, requests: int) -> dict[str, float]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "KITTIWAKE_DATA_DIR": tmp, "KITTIWAKE_LOG": "ERROR"}
        argv = [sys.executable, "-m", "gateway", "serve", "--port", str(port), "--directory", tmp]
        if mode != "none":
            env["KITTIWAKE_SERVER_PASSWORD"] = PASSWORD
        if mode == "token":
            argv.append("--tokens")
        server = await trio.lowlevel.open_process(
            argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            basic = "Basic " + base64.b64encode(f"kittiwake:{PASSWORD}".encode()).decode()
            await wait_healthy(url, time.perf_counter() + 60)
            auth: str | None = None
            if mode == "basic":
                auth = basic
            elif mode == "token":
                async with httpx.AsyncClient(base_url=url, headers={"Authorization": basic}) as c:
                    body = {"user": "bench", "project": "*", "role": "read"}
                    created = await c.post("/api/token", json=body)
                    auth = "Bearer " + created.json()["data"]["token"]
            pids = [server.pid, *descendants(server.pid)]
            return await _measure(url, auth, requests, pids)
        finally:
            server.terminate()
            with trio.move_on_after(30):
                await server.wait()


async def _gate(calls: int) -> dict[str, float]:
    """The gate alone, in this process: microseconds per ``Access.admit`` of a request
    (median of 20 batches of *calls*), on a runtime's real DuckDB store."""
    from gateway.http import AccessLimits
    from gateway.http._access import Access
    from runtime import open_runtime

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with open_runtime(data_dir=Path(tmp), llm=None) as rt:
            basic = "Basic " + base64.b64encode(f"kittiwake:{PASSWORD}".encode()).decode()
            limits = AccessLimits(recheck=3600.0)
            gates = {
                "none": (Access(rt.storage, password=None, tokens=False, limits=limits), None),
                "basic": (
                    Access(rt.storage, password=PASSWORD, tokens=False, limits=limits),
                    basic,
                ),
            }
            tokens = Access(rt.storage, password=PASSWORD, tokens=True, limits=limits)
            token, _ = await tokens.create_token(
                user="b", project="*", role="read", expires_in=None
            )
            gates["token"] = (tokens, "Bearer " + token)
            started = time.perf_counter()
            await tokens.admit("Bearer " + token, "127.0.0.1", "GET", "/api/session")
            out["token: first (scrypt verify) ms"] = (time.perf_counter() - started) * 1000
            for mode, (gate, header) in gates.items():
                batches = []
                for _ in range(20):
                    started = time.perf_counter()
                    for _ in range(calls):
                        await gate.admit(header, "127.0.0.1", "GET", "/api/session")
                    batches.append((time.perf_counter() - started) / calls * 1e6)
                out[f"{mode}: admit us"] = statistics.median(batches)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000, help="gate calls per batch")
    args = parser.parse_args()
    for key, value in trio.run(_gate, args.calls).items():
        print(f"{key:<40}{value:>10.2f}")
    results: dict[str, list[dict[str, float]]] = {"none": [], "basic": [], "token": []}
    for _ in range(args.runs):
        for mode in results:  # interleaved: each run's modes share the machine's hour
            results[mode].append(trio.run(_run, mode, args.requests))
    if not args.runs:
        return
    keys = list(results["none"][0])
    print(f"{'measure (ms)':<32}" + "".join(f"{m:>10}" for m in results))
    for key in keys:
        row = [statistics.median(r[key] for r in runs) for runs in results.values()]
        print(f"{key:<32}" + "".join(f"{v:>10.3f}" for v in row))


if __name__ == "__main__":
    main()
