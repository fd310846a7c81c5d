"""Seeded simulation: tool-calling turns cut by interrupts, failures and the turn cap at
random points; every request sent is still one a provider accepts, and every turn ends.

Under trio's MockClock with inline storage and a seeded scheduler (as ``sims.harness``),
so a failing seed replays.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import UNSET

from runtime import AssistantMessage, IdGenerator, Location, Prompt, llm, open_runtime
from runtime import messages as m
from runtime.agents import BUILD
from runtime.tools import Tool, ToolContext, ToolEnvironment, ToolOutput, ToolRegistry
from runtime.tools.testing import testing_registry
from sims.harness import _context, run_seeded
from tests.execution.conftest import request_problems

SESSIONS = 5


class NestedInput(msgspec.Struct, frozen=True, kw_only=True):
    seconds: float


async def _nested(data: NestedInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
    """Sleep inside a nursery of its own: cancelled, it raises a BaseExceptionGroup."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.sleep, data.seconds)
    return ToolOutput(content=[llm.TextPart(text="nested done")])


def _tools(env: ToolEnvironment) -> ToolRegistry:
    registry, _ = testing_registry(env)
    registry.contribute(
        Tool(name="nested", description="Sleep.", input_type=NestedInput, handler=_nested)
    )
    return registry


class RandomProvider:
    """Streams seeded random answers: text with pauses, local and hosted tool calls,
    unknown tools, error events and raised failures mid-stream."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.requests: list[llm.LLMRequest] = []

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.LLMEvent]:
        self.requests.append(request)
        rng, n = self.rng, len(self.requests)
        yield llm.StepStart()
        if rng.random() < 0.4:
            yield llm.ReasoningStart(id="r")
            yield llm.ReasoningDelta(id="r", delta="hmm ")
            if rng.random() < 0.7:
                yield llm.ReasoningEnd(id="r")
        yield llm.TextStart(id="t")
        for i in range(rng.randint(0, 6)):
            await trio.sleep(rng.uniform(0, 0.3))
            yield llm.TextDelta(id="t", delta=f"w{i} ")
        ending = rng.choice(["answer", "tools", "tools", "error", "raise", "hosted"])
        if ending == "error":
            yield llm.ProviderError(kind="retryable", message="stream cut")
            return
        if ending == "raise":
            raise ConnectionResetError("socket closed")
        yield llm.TextEnd(id="t")
        if ending == "hosted":
            yield llm.ToolCall(call_id=f"h{n}", name="web", input={}, provider_executed=True)
            if rng.random() < 0.5:
                yield llm.HostedToolResult(call_id=f"h{n}", name="web", result={"ok": True})
            else:
                yield llm.ProviderError(kind="retryable", message="cut after a hosted call")
                return
        if ending in ("tools", "hosted"):
            for k in range(rng.randint(1, 3)):
                call = f"c{n}_{k}"
                seconds = rng.uniform(0, 2)
                name, data = rng.choice(
                    [
                        ("slow", {"seconds": seconds}),
                        ("nested", {"seconds": seconds}),
                        ("echo", {"text": "x"}),
                        ("failing", {}),
                        ("nowhere", {}),
                    ]
                )
                if rng.random() < 0.3:
                    yield llm.ToolInputStart(call_id=call, name=name)
                    await trio.sleep(rng.uniform(0, 0.2))
                    yield llm.ToolInputEnd(call_id=call)
                yield llm.ToolCall(call_id=call, name=name, input=data)
            finish = "tool-calls"
        else:
            finish = "stop"
        await trio.sleep(rng.uniform(0, 0.2))
        yield llm.StepFinish(finish_reason=finish, usage=llm.Usage(output_tokens=1))


def _simulate(seed: int, data_dir: Path) -> tuple[list[llm.LLMRequest], list[AssistantMessage]]:
    return run_seeded(seed, _scenario, seed, data_dir)


async def _scenario(
    seed: int, data_dir: Path
) -> tuple[list[llm.LLMRequest], list[AssistantMessage]]:
    rng = random.Random(seed)

    def now_ms() -> int:
        return 1_800_000_000_000 + int(trio.current_time() * 1000)

    provider = RandomProvider(random.Random(seed + 1))
    options: dict[str, Any] = dict(
        storage_mode="inline", location_loads="inline", now_ms=now_ms,
        ids=IdGenerator(clock_ms=now_ms, rng=rng),
        tools=_tools, context=_context, tool_output_cleanup_every=None,
        agents={"build": msgspec.structs.replace(BUILD, steps=4)},
    )  # fmt: skip
    work = data_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    async with open_runtime(data_dir=data_dir, llm=provider, **options) as rt:
        location = Location(directory=str(work))
        sids = [(await rt.sessions.create(location=location)).id for _ in range(SESSIONS)]

        async def user(sid: str, rng: random.Random) -> None:
            for index in range(6):
                await trio.sleep(rng.uniform(0, 2))
                action = rng.choice(["prompt", "prompt", "steer", "interrupt", "interrupt"])
                if action == "interrupt":
                    await rt.sessions.interrupt(sid)
                else:
                    delivery = "steer" if action == "steer" else "queue"
                    text = f"{action} {index}"
                    await rt.sessions.prompt(sid, prompt=Prompt(text=text), delivery=delivery)

        async with trio.open_nursery() as nursery:
            for index, sid in enumerate(sids):
                nursery.start_soon(user, sid, random.Random(seed * 100 + index))
        for sid in sids:
            await rt.sessions.wait_idle(sid)
            # One more request over the whole history, whatever was cut before.
            await rt.sessions.prompt(sid, prompt=Prompt(text="finally"))
            await rt.sessions.wait_idle(sid)
        assistants = [
            message
            for sid in sids
            for message in await rt.sessions.context(sid)
            if isinstance(message, AssistantMessage)
        ]
    return provider.requests, assistants


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_every_request_is_acceptable_and_every_turn_ends(seed: int, tmp_path: Path) -> None:
    requests, assistants = _simulate(seed, tmp_path / "run")
    assert len(requests) > SESSIONS
    problems = [(i, p) for i, request in enumerate(requests) for p in request_problems(request)]
    assert problems == []
    assert assistants
    for message in assistants:
        assert message.time.completed is not UNSET, message.id
        assert message.finish is not UNSET or message.error is not UNSET, message.id
        for part in message.content:
            if isinstance(part, m.AssistantTool):
                assert isinstance(part.state, m.ToolCompleted | m.ToolError), (message.id, part)
