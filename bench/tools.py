"""Tool Registry costs: bounding throughput and ``shell`` round-trip overhead.

Run: .venv/bin/python bench/tools.py [--megabytes N] [--runs R] [--shell-runs S]

Bounding: one settlement whose text is N MB (default 100) of 80-column lines,
measured as (a) the sans-IO work alone (measure, preview) and (b) a full
``ToolRegistry.settle`` including the exclusive Managed Tool Output File write.
Shell: median wall time of ``settle("shell", {"command": "echo hi"})`` against a
bare ``trio.run_process(["bash", "-c", "echo hi"])``; the difference is the
registry and tool overhead.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import trio

from runtime.agents import BUILD
from runtime.llm import TextPart
from runtime.tools import (
    Tool,
    ToolContext,
    ToolEnvironment,
    ToolOutput,
    ToolOutputLimits,
    ToolRegistry,
    bounding_text,
    exceeds_limits,
    location_registry,
    preview,
    truncation_marker,
)
from runtime.tools.testing import EchoInput

CTX = ToolContext(
    session_id="ses_bench",
    agent="build",
    assistant_message_id="msg_bench",
    tool_call_id="call_bench",
    directory=".",
)


def _text(megabytes: int) -> str:
    line = "x" * 79 + "\n"
    return line * (megabytes * 1_000_000 // len(line))


def bench_sans_io(text: str, runs: int) -> float:
    output = ToolOutput(content=[TextPart(text=text)])
    limits = ToolOutputLimits()
    marker = truncation_marker("/data/tool-output/tool_0000000000000000000000000")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        joined = bounding_text(output)
        assert joined is not None and exceeds_limits(joined, limits)
        preview(joined, limits, marker)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def bench_settle(text: str, runs: int, data_dir: str) -> float:
    registry = ToolRegistry(ToolEnvironment(directory=data_dir, data_dir=data_dir))

    async def produce(data: EchoInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        return ToolOutput(content=[TextPart(text=text)])

    registry.contribute(Tool(name="produce", description="", input_type=EchoInput, handler=produce))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = await registry.settle("produce", {"text": ""}, CTX, agent=BUILD)
        times.append(time.perf_counter() - start)
        assert result.output_paths, result
    return statistics.median(times)


async def bench_shell(runs: int, directory: str) -> tuple[float, float]:
    registry = location_registry(ToolEnvironment(directory=directory, data_dir=directory))
    tool_times, bare_times = [], []
    for _ in range(runs):
        start = time.perf_counter()
        await registry.settle("shell", {"command": "echo hi"}, CTX, agent=BUILD)
        tool_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        await trio.run_process(["bash", "-c", "echo hi"], capture_stdout=True)
        bare_times.append(time.perf_counter() - start)
    return statistics.median(tool_times), statistics.median(bare_times)


async def main(args: argparse.Namespace) -> None:
    text = _text(args.megabytes)
    megabytes = len(text.encode()) / 1e6
    sans_io = bench_sans_io(text, args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        settle = await bench_settle(text, args.runs, tmp)
        tool, bare = await bench_shell(args.shell_runs, tmp)
    print(f"bounding, sans-IO (measure + preview): {megabytes / sans_io:8.0f} MB/s")
    print(f"bounding, full settle with file write: {megabytes / settle:8.0f} MB/s")
    print(f"shell echo hi via settle: {tool * 1e3:6.2f} ms (median of {args.shell_runs})")
    print(f"bare trio.run_process:    {bare * 1e3:6.2f} ms")
    print(f"registry + tool overhead: {(tool - bare) * 1e3:6.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--shell-runs", type=int, default=50)
    trio.run(main, parser.parse_args())
