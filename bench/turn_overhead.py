"""Runtime overhead of provider turns and tool round trips, with a zero-latency ScriptedLLM.

Usage: .venv/bin/python bench/turn_overhead.py [--dir DIR] [--turns N] [--idle N]
                                              [--event-checkpoints] [--telemetry] [--pairs N]

The ScriptedLLM delivers each answer whole, as one read of a zero-latency provider's SSE
body does; ``--event-checkpoints`` makes it yield to the scheduler after every event
instead (how the figures before the HTTP/1.1 transport work were taken).

- prompt to answer: ``rt.sessions.prompt`` called until the answering ``step.ended``
  event is durable and seen on ``rt.sessions.events``, sequential in one session;
- tool round trip: a provider step that calls the ``echo`` testing tool, measured from
  that step's durable ``step.ended`` to the durable ``step.ended`` of the answer that
  follows (tool run, ``tool.success``, the next provider turn);
- throughput: 20 sessions prompted at once, each prompt awaited to idle;
- memory: peak RSS of a fresh process that activated N idle sessions (create, one
  prompt with ``resume=True`` answered by the ScriptedLLM, then idle).

``--pairs N`` measures telemetry's overhead instead (no memory figure): the three
sequential and concurrent figures, N times with telemetry off and on
(``KITTIWAKE_BENCH_SAMPLE``, else the default sampling) in alternating order in this
process, plus the process's CPU (every thread) per prompt of the prompt-with-a-tool-call
series and of the 20 sessions at once; medians and the median paired overhead
(``bench/_pairs.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import trio

from runtime import Location, Prompt, open_runtime
from runtime.events import StepEnded
from runtime.llm import (
    LLMEvent,
    LLMRequest,
    ScriptedLLM,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolMessage,
    Usage,
)
from runtime.tools import ToolEnvironment, ToolRegistry
from runtime.tools.testing import testing_registry
from storage import TelemetryOptions

Script = Callable[[LLMRequest], Sequence[LLMEvent]]


# Events are frozen: one answer serves every request, so building it is not counted.
_ANSWER: Sequence[LLMEvent] = (
    StepStart(),
    TextStart(id="t"),
    TextDelta(id="t", delta="done"),
    TextEnd(id="t"),
    StepFinish(finish_reason="stop", usage=Usage(input_tokens=10, output_tokens=1)),
)


def answer(request: LLMRequest) -> Sequence[LLMEvent]:
    return _ANSWER


EVENT_CHECKPOINTS = "--event-checkpoints" in sys.argv
# ``--telemetry``: the runtimes record spans into telemetry.duckdb (default options; the
# share of traces recorded from $KITTIWAKE_BENCH_SAMPLE, 1 by default).
_SAMPLE = float(os.environ.get("KITTIWAKE_BENCH_SAMPLE", TelemetryOptions().sample))
OPTIONS: dict[str, Any] = (
    {"telemetry": TelemetryOptions(sample=_SAMPLE)} if "--telemetry" in sys.argv else {}
)


def scripted(script: Script) -> ScriptedLLM:
    """A zero-latency ScriptedLLM whose answers arrive whole, as one read of a real
    provider's SSE body does; a checkpoint per event would add the fake's own
    scheduling (six rounds a turn) to the runtime's overhead."""
    return ScriptedLLM(script, event_checkpoints=EVENT_CHECKPOINTS)


def echo_then_answer(request: LLMRequest) -> Sequence[LLMEvent]:
    if isinstance(request.messages[-1], ToolMessage):
        return answer(request)
    call = ToolCall(call_id=f"call_{len(request.messages)}", name="echo", input={"text": "hi"})
    return [StepStart(), call, StepFinish(finish_reason="tool-calls", usage=Usage())]


def tools(env: ToolEnvironment) -> ToolRegistry:
    return testing_registry(env)[0]


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def sequential(
    directory: Path, script: Script, turns: int, options: dict[str, Any] | None = None,
    cpu: list[float] | None = None, warm: int = 20,
) -> list[list[float]]:  # fmt: skip
    """Per prompt, the perf_counter offsets (from the prompt call) of each durable step.ended.

    With *cpu*, the process's CPU seconds per prompt after the first *warm* are appended to it.
    """
    results: list[list[float]] = []
    options = OPTIONS if options is None else options
    async with open_runtime(data_dir=directory, llm=scripted(script), tools=tools, **options) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(directory)))).id
        ended: list[float] = []
        step = trio.Condition()

        async def follow() -> None:
            async with aclosing(rt.sessions.events(sid)) as stream:
                async for item in stream:
                    if isinstance(item.event, StepEnded):
                        ended.append(time.perf_counter())
                        async with step:
                            step.notify_all()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            expected = 2 if script is echo_then_answer else 1
            cpu_started = 0.0
            for i in range(turns):
                if i == warm:
                    cpu_started = time.process_time()
                ended.clear()
                started = time.perf_counter()
                await rt.sessions.prompt(sid, prompt=Prompt(text=f"turn {i}"))
                async with step:
                    while len(ended) < expected:
                        await step.wait()
                results.append([t - started for t in ended])
                await rt.sessions.wait_idle(sid)
            if cpu is not None and turns > warm:
                cpu.append((time.process_time() - cpu_started) / (turns - warm))
            nursery.cancel_scope.cancel()
    return results


async def concurrent(
    directory: Path, sessions: int, seconds: float, options: dict[str, Any] | None = None,
    cpu: list[float] | None = None,
) -> float:  # fmt: skip
    """Prompts per second with *sessions* sessions each prompted again as soon as idle.

    With *cpu*, the process's CPU seconds per prompt of that series are appended to it.
    """
    options = OPTIONS if options is None else options
    async with open_runtime(data_dir=directory, llm=scripted(answer), tools=tools, **options) as rt:
        loc = Location(directory=str(directory))
        sids = [(await rt.sessions.create(location=loc)).id for _ in range(sessions)]
        for sid in sids:  # warm every session once
            await rt.sessions.prompt(sid, prompt=Prompt(text="warm up"))
            await rt.sessions.wait_idle(sid)
        done = 0
        deadline = time.perf_counter() + seconds

        async def drive(sid: str) -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                await rt.sessions.prompt(sid, prompt=Prompt(text="go"))
                await rt.sessions.wait_idle(sid)
                done += 1

        started, cpu_started = time.perf_counter(), time.process_time()
        async with trio.open_nursery() as nursery:
            for sid in sids:
                nursery.start_soon(drive, sid)
        if cpu is not None and done:
            cpu.append((time.process_time() - cpu_started) / done)
        return done / (time.perf_counter() - started)


class _CountingLLM:
    """Answers like ``answer`` and counts calls without keeping every request (a
    ScriptedLLM's request log would be counted as the runtime's memory)."""

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: LLMRequest) -> AsyncIterator[LLMEvent]:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        for event in answer(request):
            yield event


async def idle_sessions(directory: Path, count: int) -> dict[str, Any]:
    """Activate *count* sessions once, then report this process's peak and current RSS."""
    llm = _CountingLLM()
    started = time.perf_counter()
    async with open_runtime(data_dir=directory, llm=llm, tools=tools) as rt:
        loc = Location(directory=str(directory))
        limit = trio.CapacityLimiter(200)

        async def activate() -> None:
            async with limit:
                sid = (await rt.sessions.create(location=loc)).id
                await rt.sessions.prompt(sid, prompt=Prompt(text="hello"))
                await rt.sessions.wait_idle(sid)

        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(activate)
        activated = time.perf_counter() - started
        await trio.sleep(1.0)
        current = _current_rss_kib()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {
            "sessions": count,
            "requests": llm.calls,
            "activate_s": round(activated, 2),
            "peak_rss_mib": round(peak / 1024, 1),
            "idle_rss_mib": round(current / 1024, 1),
        }


def _current_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.2f} ms, p95 {_percentile(values, 0.95) * 1000:.2f} ms"


def _side(args: argparse.Namespace, options: dict[str, Any]) -> dict[str, float]:
    """The figures ``--pairs`` compares, with *options* (telemetry or not)."""
    warm = 20
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        plain = trio.run(sequential, Path(name), answer, args.turns + warm, options)[warm:]
    figures["prompt to answer, median"] = statistics.median(r[0] for r in plain)
    cpu: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        tool = trio.run(
            sequential, Path(name), echo_then_answer, args.turns + warm, options, cpu, warm
        )[warm:]
    figures["tool round trip, median"] = statistics.median(r[1] - r[0] for r in tool)
    figures["prompt with one tool call, median"] = statistics.median(r[1] for r in tool)
    figures["prompt with one tool call, process CPU per prompt"] = cpu[0]
    busy: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        figures["20 sessions at once (prompts/s)"] = trio.run(
            concurrent, Path(name), 20, args.seconds, options, busy
        )
    figures["20 sessions at once, process CPU per prompt"] = busy[0]
    return figures


def pairs(args: argparse.Namespace) -> None:
    """Telemetry off against on, ``--pairs`` times in alternating order (see the docstring)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench._pairs import first_is_off, pair_report

    on_options: dict[str, Any] = {"telemetry": TelemetryOptions(sample=_SAMPLE)}
    sides: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for pair in range(args.pairs):
        for on in (False, True) if first_is_off(pair) else (True, False):
            sides[on].append(_side(args, on_options if on else {}))
    print(f"telemetry off / sampled {_SAMPLE:g}, {args.pairs} pairs, {args.turns} turns each:")
    for name in sides[False][0]:
        off = [run[name] for run in sides[False]]
        on_runs = [run[name] for run in sides[True]]
        rate = name.endswith("(prompts/s)")
        print(pair_report(name, off, on_runs, unit="/s" if rate else "ms",
                          scale=1.0 if rate else 1000.0, higher_is_better=rate))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the run directories")
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--idle-child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--event-checkpoints", action="store_true", help="yield after every scripted event"
    )
    parser.add_argument("--telemetry", action="store_true", help="record spans (telemetry on)")
    parser.add_argument("--pairs", type=int, default=0, help="telemetry off / on pairs")
    args = parser.parse_args()
    if args.pairs:
        pairs(args)
        return
    if args.idle_child is not None:
        print(json.dumps(trio.run(idle_sessions, args.idle_child, args.idle)))
        return

    warm = 20
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        plain = trio.run(sequential, Path(name), answer, args.turns + warm)[warm:]
    print(f"prompt to answer, 1 session, {args.turns} turns: {_ms([r[0] for r in plain])}")

    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        tool = trio.run(sequential, Path(name), echo_then_answer, args.turns + warm)[warm:]
    print(
        f"tool round trip (step.ended to step.ended), {args.turns}: {_ms([r[1] - r[0] for r in tool])}"
    )
    print(f"prompt to answer with one tool call, {args.turns}: {_ms([r[1] for r in tool])}")

    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        rate = trio.run(concurrent, Path(name), 20, args.seconds)
    print(f"20 sessions at once: {rate:,.0f} prompts/s")

    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        out = subprocess.run(
            [sys.executable, __file__, "--idle", str(args.idle), "--idle-child", name],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
    report = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"{report['sessions']:,} idle sessions (activated in {report['activate_s']} s, "
        f"{report['requests']:,} provider requests): peak RSS {report['peak_rss_mib']} MiB, "
        f"RSS when idle {report['idle_rss_mib']} MiB"
    )


if __name__ == "__main__":
    main()
