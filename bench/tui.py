"""OpenCode's terminal UI on Kittiwake against the same UI on ``opencode serve``.

Run: .venv/bin/python bench/tui.py [--runs 10] [--chunks 20] [--delay 0.05] [--poll 0.002]

Needs ``make opencode`` (the pinned clients in ``clients/node_modules``) and tmux.

One local chat-completions mock (the tests' ``LocalServer``, ``tests/opencode/harness.py``)
serves both servers: ``kittiwake serve`` with a ``kittiwake.json`` and ``opencode serve
--pure`` with the same provider block in ``opencode.json`` (``@ai-sdk/openai-compatible``,
``baseURL`` the mock), each in a project directory and home of its own, with OpenCode's
update checks, models.dev fetch, default plugins, LSP downloads, sharing and Claude Code
imports turned off, so that neither reaches beyond 127.0.0.1 (``ss`` after every prompt
lists the TCP peers of the ``opencode`` processes and of ``kittiwake serve``; any beyond
loopback are printed). One ``opencode attach`` per
server runs in its own tmux (120x40).

A prompt ``bench N`` is answered with ``--chunks`` SSE chunks, ``--delay`` seconds apart,
the first ``B<N>x`` and the last ``E<N>x`` (by default 20 chunks 50 ms apart: the answer
streams for 0.95 s, so the first character and idle are apart). Per prompt, the clock starts just before tmux
sends Enter and the pane is captured in a loop (``--poll`` seconds between captures, plus
the capture itself; the mean interval is printed as the resolution):

- **first character**: the first capture showing ``B<N>x``;
- **idle**: the first capture showing ``E<N>x`` without the busy line's ``esc interrupt``.

Two warm-up prompts per UI (the first of a session also makes OpenCode ask the model for a
title; Kittiwake asks none of an unpriced local model), then ``--runs`` prompts per UI in the
same session, interleaved, the order alternating per run. Then the same prompts without a UI
(``Wire``: ``POST /session/{id}/prompt_async``, the V1 events of ``GET /event`` read on a
thread, one session per server, one warm-up prompt): POST to the delta carrying ``B<N>x``,
and to ``session.status`` idle, so the servers' share of the UI's figures shows. Medians and
p90 are printed.
"""

from __future__ import annotations

import argparse
import json
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._opencode import OpenCodeServe  # noqa: E402
from tests.llm.conftest import Recorded, Reply  # noqa: E402
from tests.opencode.harness import (  # noqa: E402
    OPENCODE,
    Kittiwake,
    Provider,
    Tmux,
    client_env,
    last_user_text,
    respond,
    said,
)


def responder(chunks: int, delay: float) -> Callable[[Recorded], Reply]:
    """The tests' script, but ``bench N`` is answered ``B<N>x word0 ... E<N>x.``."""

    def answer(request: Recorded) -> Reply:
        words = last_user_text(request.json()).split()
        if len(words) == 2 and words[0] == "bench":
            n = words[1]
            middle = [f"word{i} " for i in range(max(chunks - 2, 0))]
            return said(f"B{n}x ", *middle, f"E{n}x.", delay=delay)
        return respond(request)

    return answer


def remote_peers(markers: tuple[str, ...]) -> list[str]:
    """TCP peers of the processes whose ``ss -p`` entry holds one of *markers* (``"opencode"``:
    the servers and UIs; ``pid=N,``): ``local:N`` counts the loopback ones, then every other
    peer."""
    done = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True, check=False)
    peers = []
    local = 0
    for line in done.stdout.splitlines():
        fields = line.split()
        if any(m in line for m in markers) and len(fields) >= 5:
            local += 1
            peer = fields[4]
            if not peer.startswith(("127.", "[::1]", "[::ffff:127.")):
                peers.append(peer)
                local -= 1
    return [f"local:{local}", *peers]


class Ui:
    def __init__(self, name: str, url: str, tmp: Path) -> None:
        self.name = name
        tmp.mkdir(parents=True)
        self.tmux = Tmux(tmp, [str(OPENCODE), "attach", url], client_env(tmp))
        self.first: list[float] = []
        self.idle: list[float] = []
        self.polls: list[float] = []

    def ready(self) -> None:
        self.tmux.wait_for(lambda s: "Ask anything" in s and "Mock One" in s, 120, "home")

    def prompt(self, n: int, poll: float, timeout: float = 60.0) -> tuple[float, float]:
        """Seconds from Enter to ``B<n>x`` on screen, and to idle."""
        text = f"bench {n}"
        self.tmux.type(text)
        self.tmux.wait_for(lambda s: text in s, 20, "the typed prompt")
        start = time.perf_counter()
        self.tmux.keys("Enter")
        first: float | None = None
        captures = 0
        while True:
            screen = self.tmux.screen()
            now = time.perf_counter() - start
            captures += 1
            if first is None and f"B{n}x" in screen:
                first = now
            if first is not None and f"E{n}x" in screen and "esc interrupt" not in screen:
                self.polls.append(now / captures)
                return first, now
            if now > timeout:
                raise RuntimeError(f"{self.name}: no answer to {text}:\n{screen}")
            time.sleep(poll)

    def close(self) -> None:
        self.tmux.close()


class Wire:
    """The same prompts without a UI: ``POST /session/{id}/prompt_async`` and the V1 events
    of ``GET /event`` read on a thread, so that the servers' share of the UI's figures shows."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self.first: list[float] = []
        self.idle: list[float] = []
        self.events: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self._client = httpx.Client(base_url=url, timeout=30)
        self.session = self._client.post("/session", json={}).json()["id"]
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._connected = threading.Event()
        self._thread.start()
        if not self._connected.wait(30):
            raise RuntimeError(f"{name}: GET /event did not answer")

    def _read(self) -> None:
        try:
            with httpx.stream("GET", self.url + "/event", timeout=httpx.Timeout(5, read=None)) as r:
                self._connected.set()
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        self.events.put((time.perf_counter(), json.loads(line[6:])))
        except httpx.HTTPError:
            return

    def prompt(self, n: int, timeout: float = 60.0) -> tuple[float, float]:
        """Seconds from the POST to the delta carrying ``B<n>x``, and to ``session.status``
        idle."""
        while not self.events.empty():
            self.events.get_nowait()
        body = {"parts": [{"type": "text", "text": f"bench {n}"}]}
        start = time.perf_counter()
        answer = self._client.post(f"/session/{self.session}/prompt_async", json=body)
        answer.raise_for_status()
        first: float | None = None
        while True:
            at, event = self.events.get(timeout=timeout)
            props = event.get("properties", {})
            if props.get("sessionID") != self.session:
                continue
            if first is None and event["type"] == "message.part.delta":
                if f"B{n}x" in props.get("delta", ""):
                    first = at - start
            status = props.get("status", {}).get("type")
            if first is not None and event["type"] == "session.status" and status == "idle":
                return first, at - start

    def close(self) -> None:
        self._client.close()


def summary(name: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"{name:<22} median {statistics.median(ms):7.1f} ms   p90 {p90:7.1f} ms"


def main(runs: int, chunks: int, delay: float, poll: float) -> None:
    if shutil.which("tmux") is None or not OPENCODE.exists():
        raise SystemExit("needs tmux and the pinned clients: run `make opencode`")
    tmp = Path(tempfile.mkdtemp(prefix="bench-tui-"))
    provider = Provider(responder(chunks, delay)).start()
    kittiwake = Kittiwake(tmp / "kittiwake", provider)
    opencode = OpenCodeServe(tmp / "opencode", provider.port)
    uis: list[Ui] = []
    wires: list[Wire] = []
    try:
        started = time.perf_counter()
        kittiwake.start()
        print(f"kittiwake serve ready in {time.perf_counter() - started:.1f} s", flush=True)
        started = time.perf_counter()
        opencode.start()
        print(f"opencode serve ready in {time.perf_counter() - started:.1f} s", flush=True)
        uis = [
            Ui("kittiwake", kittiwake.url, tmp / "ui-k"),
            Ui("opencode", opencode.url, tmp / "ui-o"),
        ]
        assert kittiwake.process is not None
        markers = ('"opencode"', f"pid={kittiwake.process.pid},")
        for ui in uis:
            ui.ready()
        peers = set(remote_peers(markers)[1:])
        print(f"loopback sockets of the servers and UIs: {remote_peers(markers)[0]}")
        n = 0
        for ui in uis:  # warm-up: a session, its title (OpenCode), the code paths
            for _ in range(2):
                n += 1
                ui.prompt(n, poll)  # not recorded
                peers.update(remote_peers(markers)[1:])
            ui.polls.clear()
        for run in range(runs):
            for ui in uis if run % 2 == 0 else uis[::-1]:
                n += 1
                first, idle = ui.prompt(n, poll)
                ui.first.append(first)
                ui.idle.append(idle)
                peers.update(remote_peers(markers)[1:])
        wires = [Wire("kittiwake", kittiwake.url), Wire("opencode", opencode.url)]
        for wire in wires:  # warm-up
            n += 1
            wire.prompt(n)
        for run in range(runs):
            for wire in wires if run % 2 == 0 else wires[::-1]:
                n += 1
                first, idle = wire.prompt(n)
                wire.first.append(first)
                wire.idle.append(idle)
        for wire in wires:
            wire.close()
        print(f"TCP peers beyond loopback seen: {sorted(peers) or 'none'}")
    finally:
        for ui in uis:
            ui.close()
        kittiwake.stop()
        opencode.stop()
        provider.stop()
    print(
        f"{runs} prompts per UI, {chunks} chunks {delay * 1000:.0f} ms apart; poll {poll * 1000:.0f} ms"
    )
    for ui in uis:
        resolution = statistics.mean(ui.polls) * 1000
        print(f"{ui.name}: capture interval {resolution:.1f} ms")
        print("  " + summary("Enter -> first char", ui.first))
        print("  " + summary("Enter -> idle", ui.idle))
    for wire in wires:
        print(f"{wire.name} without a UI (POST prompt_async, GET /event):")
        print("  " + summary("POST -> first delta", wire.first))
        print("  " + summary("POST -> idle", wire.idle))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="measured prompts per UI (10)")
    parser.add_argument("--chunks", type=int, default=20, help="SSE chunks per answer (20)")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds between chunks")
    parser.add_argument("--poll", type=float, default=0.002, help="seconds between captures")
    args = parser.parse_args()
    main(args.runs, args.chunks, args.delay, args.poll)
