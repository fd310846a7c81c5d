"""Overhead of a subagent task round trip with a zero-latency ScriptedLLM, embedded and over HTTP.

Usage: .venv/bin/python bench/task_overhead.py [--dir DIR] [--calls N] [--warm N]

A parent turn calls a tool; the next parent turn answers. The tool is either the ``echo``
testing tool (the baseline) or ``task`` with the ``general`` subagent, whose child session
(new at each call) answers in one provider turn.

- embedded, tool call to tool result: from the parent's durable ``tool.called`` to its
  durable ``tool.success`` as seen on ``rt.sessions.events`` (for ``task``: create the child,
  admit its prompt, its drain and provider turn, wait for it to be idle, read its answer);
- over HTTP, prompt to idle: ``POST /api/session/{id}/prompt`` then ``POST
  /api/session/{id}/wait`` on a real Hypercorn server on 127.0.0.1, as a client sees it.

The task's overhead is its figure minus echo's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import aclosing
from functools import partial
from pathlib import Path

import httpx
import trio

from runtime import Location, Prompt, open_runtime
from runtime.events import ToolCalled, ToolSuccess
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
    UserMessage,
)
from runtime.tools import ToolEnvironment, ToolRegistry
from runtime.tools.testing import testing_registry

_ANSWER: Sequence[LLMEvent] = (
    StepStart(),
    TextStart(id="t"),
    TextDelta(id="t", delta="done"),
    TextEnd(id="t"),
    StepFinish(finish_reason="stop", usage=Usage(input_tokens=10, output_tokens=1)),
)
_TASK = {"description": "child", "prompt": "child work", "subagent_type": "general"}


def script(request: LLMRequest) -> Sequence[LLMEvent]:
    """Answer a tool result or a child's prompt; else call ``echo`` or ``task`` as the
    prompt's first word says."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return _ANSWER
    assert isinstance(last, UserMessage)
    text = getattr(last.content[0], "text", "")
    if text.startswith("child"):
        return _ANSWER
    n = len(request.messages)
    call = (
        ToolCall(call_id=f"c{n}", name="echo", input={"text": "hi"})
        if text.startswith("echo")
        else ToolCall(call_id=f"c{n}", name="task", input=_TASK)
    )
    return [StepStart(), call, StepFinish(finish_reason="tool-calls", usage=Usage())]


def tools(env: ToolEnvironment) -> ToolRegistry:
    return testing_registry(env)[0]


def _stats(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(values) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms"


async def embedded(directory: Path, kind: str, calls: int, warm: int) -> list[float]:
    """Tool call to tool result of *calls* prompts whose turn calls *kind*."""
    llm = ScriptedLLM(script, event_checkpoints=False)
    async with open_runtime(data_dir=directory / "data", llm=llm, tools=tools) as rt:
        loc = Location(directory=str(directory))
        sid = (await rt.sessions.create(location=loc)).id
        called: dict[str, float] = {}
        spans: list[float] = []
        settled = trio.Event()

        async def follow() -> None:
            nonlocal settled
            async with aclosing(rt.sessions.events(sid)) as stream:
                async for item in stream:
                    if isinstance(item.event, ToolCalled):
                        called[item.event.call_id] = time.perf_counter()
                    elif isinstance(item.event, ToolSuccess):
                        spans.append(time.perf_counter() - called[item.event.call_id])
                        settled.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            for i in range(calls + warm):
                settled = trio.Event()
                await rt.sessions.prompt(sid, prompt=Prompt(text=f"{kind} {i}"))
                await settled.wait()
                await rt.sessions.wait_idle(sid)
            nursery.cancel_scope.cancel()
    return spans[warm:]


async def over_http(directory: Path, kind: str, calls: int, warm: int) -> list[float]:
    """Client-side prompt to idle of *calls* prompts whose turn calls *kind*."""
    from gateway import serve  # after main() took bench/ (whose gateway.py shadows it) off the path

    llm = ScriptedLLM(script, event_checkpoints=False)
    async with open_runtime(data_dir=directory / "data", llm=llm, tools=tools) as rt:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=directory))
            async with httpx.AsyncClient(base_url=server.url) as client:
                r = await client.post(
                    "/api/session", json={"location": {"directory": str(directory)}}
                )
                sid = r.json()["data"]["id"]
                spans: list[float] = []
                for i in range(calls + warm):
                    started = time.perf_counter()
                    body = {"prompt": {"text": f"{kind} {i}"}}
                    assert (await client.post(f"/api/session/{sid}/prompt", json=body)).is_success
                    assert (await client.post(f"/api/session/{sid}/wait")).status_code == 204
                    spans.append(time.perf_counter() - started)
            server.stop()
    return spans[warm:]


def main() -> None:
    bench = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != bench]
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the run directories")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warm", type=int, default=20)
    args = parser.parse_args()
    results: dict[tuple[str, str], list[float]] = {}
    for where, run in (("embedded", embedded), ("http", over_http)):
        for kind in ("echo", "task"):
            with tempfile.TemporaryDirectory(dir=args.dir) as name:
                results[where, kind] = trio.run(run, Path(name), kind, args.calls, args.warm)
    for where, what in (("embedded", "tool call to tool result"), ("http", "prompt to idle")):
        echo, task = results[where, "echo"], results[where, "task"]
        extra = (statistics.median(task) - statistics.median(echo)) * 1000
        print(f"{where}, {what}, {args.calls} calls: echo {_stats(echo)}; task {_stats(task)}; "
              f"task overhead {extra:.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
