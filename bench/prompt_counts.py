"""What a served prompt does, counted: store operations, trio task steps, collections.

Run: .venv/bin/python bench/prompt_counts.py [--prompts 300] [--concurrent 20] [--tree DIR]
                                            [--steps 20]

The server is ``bench/gateway.py``'s (a runtime on a temporary DuckDB store behind
Hypercorn, the zero-latency OpenAI-compatible mock through the real ``ProviderClient``,
telemetry on, the collector settled as ``kittiwake serve`` settles it), run in this process
so that it can be counted; ``--tree DIR`` serves another checkout's runtime. A child
process drives it as ``bench/profile.py`` does: ``--prompts`` sequential prompts (``POST
/prompt`` then ``POST /wait``, a new session every 50), then as many again over
``--concurrent`` new sessions at once, after a warm-up. Per prompt, over both series:

- the store's writes and reads by command and query (``StorageActor.write`` / ``read``),
  and how often its thread was woken for a batch;
- trio's task spawns by coroutine, and task steps by where the task stopped (the innermost
  frame of ours, and the library frames below it; ``--steps`` of them): a step is a
  scheduling round of the run loop;
- the cyclic collector: collections by generation and the CPU the collecting thread spent
  in them (``gc.callbacks``, ``time.thread_time``);
- lookups of Quart's context proxies (``quart.request``, ``quart.g``, ...: each attribute
  of one resolves the proxy's context variable again), by proxy and by the line that
  looked it up (``--steps`` of them); and, after the run, what one lookup costs: an
  attribute read through ``quart.request`` against the same read on the request object,
  in a Quart-Trio test request context (median of 5 series of 100,000).

Counts do not depend on the machine's load, unlike CPU figures (the collector's CPU does).
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any, Final

import trio

ROOT: Final = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import gateway as served  # noqa: E402 - the root is on the path first
from bench._lean import free_port, wait_healthy  # noqa: E402

_CLIENT: Final = """
import sys
sys.path.insert(0, sys.argv[1])
import trio
from bench.profile import _drive
trio.run(_drive, sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
"""


class _Steps(trio.abc.Instrument):
    """Task spawns and steps while ``on``, each step by where the task stopped."""

    def __init__(self) -> None:
        self.on = False
        self.spawned: collections.Counter[str] = collections.Counter()
        self.stopped: collections.Counter[tuple[str, str]] = collections.Counter()

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if self.on:
            self.spawned[task.name.rsplit(".", 1)[-1]] += 1

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.on:
            self.stopped[_where(task.coro)] += 1


def _where(coro: Any) -> tuple[str, str]:
    """The innermost frame of ours in *coro*'s await chain, and below it the library
    frame it called and the innermost one outside trio's traps."""
    ours, below = "(library only)", []
    while coro is not None:
        frame: FrameType | None = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            name = frame.f_code.co_filename
            place = f"{frame.f_code.co_qualname} ({'/'.join(name.rsplit('/', 2)[-2:])})"
            if "-packages" not in name and "/lib/python3" not in name:
                ours, below = place, []
            else:
                below.append(place)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    below = [place for place in below if "_core/_traps.py" not in place]
    return ours, " > ".join(dict.fromkeys(below[:1] + below[-1:]))


class _Collections:
    """Collections by generation and the CPU spent in them while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.count: collections.Counter[int] = collections.Counter()
        self.cpu = 0.0
        self._started: dict[int, float] = {}
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict[str, int]) -> None:
        if not self.on:
            return
        thread = threading.get_ident()
        if phase == "start":
            self._started[thread] = time.thread_time()
        elif thread in self._started:
            self.cpu += time.thread_time() - self._started.pop(thread)
            self.count[info["generation"]] += 1


def _count_store(ops: collections.Counter[str]) -> None:
    """Count the store's operations (the actor is this benchmark's to wrap)."""
    from actors.store import StorageActor

    write, read, kick = StorageActor.write, StorageActor.read, StorageActor._kick

    async def counted_write(self: Any, command: Any, **options: Any) -> Any:
        then = options.get("then")
        ops[f"write {type(command).__name__}" + (f" + {type(then).__name__}" if then else "")] += 1
        return await write(self, command, **options)

    async def counted_read(self: Any, query: Any) -> Any:
        ops[f"read {type(query).__name__}"] += 1
        return await read(self, query)

    def counted_kick(self: Any) -> None:
        ops["the store's thread woken for a batch"] += 1
        kick(self)

    StorageActor.write, StorageActor.read = counted_write, counted_read  # type: ignore[method-assign]
    StorageActor._kick = counted_kick  # type: ignore[method-assign]


class _Lookups:
    """Lookups of Quart's context proxies while ``on``, by proxy and by the looking line."""

    def __init__(self) -> None:
        self.on = False
        self.by_proxy: collections.Counter[str] = collections.Counter()
        self.by_line: collections.Counter[str] = collections.Counter()

    def install(self) -> None:
        """Count each proxy of ``quart.globals`` (a werkzeug ``LocalProxy`` resolves its
        object through ``_get_current_object`` at every use; wrapped here)."""
        import quart.globals
        from werkzeug.local import LocalProxy

        for name, proxy in vars(quart.globals).items():
            if isinstance(proxy, LocalProxy):
                resolve = object.__getattribute__(proxy, "_get_current_object")
                object.__setattr__(proxy, "_get_current_object", self._counted(name, resolve))

    def _counted(self, name: str, resolve: Any) -> Any:
        def counted() -> Any:
            if self.on:
                self.by_proxy[name] += 1
                frame = sys._getframe(1)
                while frame.f_back is not None and "werkzeug" in frame.f_code.co_filename:
                    frame = frame.f_back
                where = "/".join(frame.f_code.co_filename.rsplit("/", 3)[-3:])
                self.by_line[f"{where}:{frame.f_lineno} ({frame.f_code.co_name})"] += 1
            return resolve()

        return counted


async def _run(args: argparse.Namespace) -> None:
    os.environ["KITTIWAKE_BENCH_TELEMETRY"] = "1"
    ops: collections.Counter[str] = collections.Counter()
    _count_store(ops)
    lookups = _Lookups()
    lookups.install()
    steps, collected = _Steps(), _Collections()
    mock_port = free_port()
    mock = f"http://127.0.0.1:{mock_port}"
    async with served._child(["--mock-openai", str(mock_port)], mock, "/"):
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(served._serve, port, tmp, mock)
                await wait_healthy(url, time.perf_counter() + 30, "/api/health")
                client = [sys.executable, "-c", _CLIENT, str(ROOT), url]
                await trio.run_process([*client, "20", str(args.concurrent)])  # warm up
                ops.clear()
                trio.lowlevel.add_instrument(steps)
                steps.on = collected.on = lookups.on = True
                await trio.run_process([*client, str(args.prompts), str(args.concurrent)])
                steps.on = collected.on = lookups.on = False
                nursery.cancel_scope.cancel()
    _report(args, ops, steps, collected, lookups, await _lookup_cost())


async def _lookup_cost() -> tuple[float, float]:
    """Seconds per ``request.method`` read through the proxy, and on the request itself."""
    from quart import request
    from quart_trio import QuartTrio

    app, n = QuartTrio(__name__), 100_000
    proxied, plain = [], []
    async with app.test_request_context("/api/session/ses_x/prompt", method="POST"):
        real = request._get_current_object()  # type: ignore[attr-defined]
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(n):
                request.method  # noqa: B018 - the read is what is timed
            proxied.append((time.perf_counter() - started) / n)
            started = time.perf_counter()
            for _ in range(n):
                real.method  # noqa: B018
            plain.append((time.perf_counter() - started) / n)
    return statistics.median(proxied), statistics.median(plain)


def _report(
    args: argparse.Namespace, ops: collections.Counter[str], steps: _Steps,
    collected: _Collections, lookups: _Lookups, cost: tuple[float, float],
) -> None:  # fmt: skip
    sent = args.prompts + args.prompts // args.concurrent * args.concurrent
    print(f"per prompt, over {sent} prompts ({args.tree or ROOT}):")
    print("\n| store operation | per prompt |\n|---|---:|")
    for name, n in ops.most_common():
        print(f"| {name} | {n / sent:.2f} |")
    spawned, stepped = sum(steps.spawned.values()), sum(steps.stopped.values())
    print(f"\ntask spawns {spawned / sent:.2f}, task steps {stepped / sent:.2f} per prompt")
    print("\n| task spawned | per prompt |\n|---|---:|")
    for name, n in steps.spawned.most_common(8):
        print(f"| {name} | {n / sent:.2f} |")
    print("\n| task steps: stopped in (ours) | below it (library) | per prompt |\n|---|---|---:|")
    for (ours, below), n in steps.stopped.most_common(args.steps):
        print(f"| {ours} | {below} | {n / sent:.2f} |")
    by_generation = ", ".join(f"{g}: {n / sent:.3f}" for g, n in sorted(collected.count.items()))
    print(f"\ncollections per prompt by generation ({by_generation}), "
          f"threshold {gc.get_threshold()}, CPU in them {collected.cpu / sent * 1e6:.0f} us "
          f"per prompt")  # fmt: skip
    total = sum(lookups.by_proxy.values())
    by_proxy = ", ".join(f"{name} {n / sent:.2f}" for name, n in lookups.by_proxy.most_common())
    print(f"\nQuart's context proxies looked up {total / sent:.2f} times per prompt ({by_proxy})")
    print("\n| proxy looked up at | per prompt |\n|---|---:|")
    for line, n in lookups.by_line.most_common(args.steps):
        print(f"| {line} | {n / sent:.2f} |")
    proxied, plain = cost
    print(f"\none read through quart.request {proxied * 1e9:.0f} ns, on the request itself "
          f"{plain * 1e9:.0f} ns (load average {os.getloadavg()[0]:.1f})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--tree", help="serve the runtime of this checkout instead of this one")
    args = parser.parse_args()
    if args.tree:  # before anything of the runtime is imported
        sys.path.insert(0, str(Path(args.tree).resolve()))
    trio.run(_run, args)


if __name__ == "__main__":
    main()
