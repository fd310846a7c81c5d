"""Deterministic simulation: the runtime under trio's MockClock with a seeded scheduler.

Storage runs inline on the trio thread (no worker threads, so the autojump clock
cannot run ahead of a thread), ids and timestamps come from the mock clock and a
seeded random source, and trio's scheduler is seeded, so one seed replays one run.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import trio
import trio.testing
from trio._core import _run

from runtime import IdGenerator, Location, Prompt, llm, open_runtime
from runtime.context import (
    SystemContext,
    SystemContextRegistry,
    date_source,
    environment_source,
)
from runtime.tools import ToolEnvironment, ToolRegistry
from runtime.tools.testing import TestingGates, testing_registry
from storage import Events

__all__ = ["run_seeded", "simulate"]

T = TypeVar("T")


def run_seeded(seed: int, main: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run *main* under a MockClock with trio's scheduler seeded by *seed*.

    Trio has no public way to seed its scheduler; its own determinism test uses these two
    private names, and this is the one place the project touches them.
    """
    _run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[attr-defined]
    _run._r.seed(seed)
    clock = trio.testing.MockClock(autojump_threshold=0)
    try:
        return trio.run(main, *args, clock=clock)
    finally:
        _run._ALLOW_DETERMINISTIC_SCHEDULING = False  # type: ignore[attr-defined]


def simulate(seed: int, data_dir: Path, *, sessions: int = 12) -> list[tuple[str, int, str]]:
    """Run one seeded scenario; return every durable event as (session, seq, data)."""
    return run_seeded(seed, _scenario, seed, data_dir, sessions)


async def _scenario(seed: int, data_dir: Path, count: int) -> list[tuple[str, int, str]]:
    rng = random.Random(seed)

    def now_ms() -> int:
        return 1_800_000_000_000 + int(trio.current_time() * 1000)

    ids = IdGenerator(clock_ms=now_ms, rng=random.Random(seed))
    gates = TestingGates()

    def tools(env: ToolEnvironment) -> ToolRegistry:
        return testing_registry(env, gates=gates)[0]

    def script(request: llm.LLMRequest) -> list[llm.LLMEvent]:
        turn = len(request.messages)
        if turn % 3 == 1:
            call = llm.ToolCall(call_id=f"c{turn}", name="slow", input={"seconds": 0.5})
            return [
                llm.StepStart(),
                call,
                llm.StepFinish(finish_reason="tool-calls", usage=llm.Usage()),
            ]
        return [
            llm.StepStart(), llm.TextStart(id="t"), llm.TextDelta(id="t", delta=f"turn {turn}"),
            llm.TextEnd(id="t"), llm.StepFinish(finish_reason="stop", usage=llm.Usage()),
        ]  # fmt: skip

    client = llm.ScriptedLLM(script, latency=0.2)
    options: dict[str, Any] = dict(
        storage_mode="inline",
        location_loads="inline",
        now_ms=now_ms,
        ids=ids,
        tools=tools,
        context=_context,
        tool_output_cleanup_every=None,
    )
    work = data_dir / "work"  # the same path in every run of a scenario
    work.mkdir(parents=True, exist_ok=True)
    async with open_runtime(data_dir=data_dir, llm=client, **options) as rt:
        location = Location(directory=str(work))
        sids = [(await rt.sessions.create(location=location)).id for _ in range(count)]
        async with trio.open_nursery() as nursery:
            for sid in sids:
                delays = sorted(rng.uniform(0, 3) for _ in range(3))
                kinds = [rng.choice(["steer", "queue"]) for _ in range(3)]
                nursery.start_soon(_client, rt, sid, delays, kinds)
        for sid in sids:
            await rt.sessions.wait_idle(sid)
        log: list[tuple[str, int, str]] = []
        for sid in sids:
            events = await rt.storage.read(Events(session_id=sid, after=-1, limit=100_000))
            log.extend((sid, e.seq, e.data.decode()) for e in events)
        return log


def _context(directory: str) -> SystemContextRegistry:
    """Context Sources that read neither files nor the host clock (no worker threads)."""
    registry = SystemContextRegistry()

    async def builtins() -> list[SystemContext]:
        day = datetime.date(2027, 1, 1) + datetime.timedelta(days=int(trio.current_time() // 2))
        environment = environment_source(
            directory=directory, workspace_root=directory, platform="linux", is_git_repo=False
        )
        return [environment, date_source(today=lambda: day)]

    registry.contribute("core/builtins", builtins)
    return registry


async def _client(rt: Any, sid: str, delays: list[float], kinds: list[str]) -> None:
    previous = 0.0
    for index, (delay, kind) in enumerate(zip(delays, kinds, strict=True)):
        await trio.sleep(delay - previous)
        previous = delay
        await rt.sessions.prompt(sid, prompt=Prompt(text=f"prompt {index}"), delivery=kind)
