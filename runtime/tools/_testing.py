"""Deterministic tools for tests of the registry and of the session drain loop."""

from __future__ import annotations

from typing import Any, final

import msgspec
import trio

from runtime.llm import TextPart
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._registry import ToolRegistry
from runtime.tools._tool import Tool

__all__ = [
    "EchoInput",
    "FailingInput",
    "GatedInput",
    "SlowInput",
    "TestingGates",
    "testing_registry",
    "testing_tools",
]


class EchoInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``echo``."""

    text: str


class GatedInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``gated``: which gate to wait on."""

    key: str


class SlowInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``slow``."""

    seconds: float


class FailingInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``failing``: the error message."""

    message: str = "failing tool failed"


@final
class TestingGates:
    """Named ``trio.Event``s the ``gated`` tool waits on; tests set them."""

    __test__ = False

    def __init__(self) -> None:
        self._events: dict[str, trio.Event] = {}
        self.started: list[str] = []

    def event(self, key: str) -> trio.Event:
        """The event for *key* (created on first use)."""
        return self._events.setdefault(key, trio.Event())

    def open(self, key: str) -> None:
        """Let every ``gated`` call with *key* finish."""
        self.event(key).set()


def _text(value: str) -> ToolOutput:
    return ToolOutput(content=[TextPart(text=value)])


async def _echo(data: EchoInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
    await trio.lowlevel.checkpoint()
    return _text(data.text)


async def _slow(data: SlowInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
    await trio.sleep(data.seconds)
    return _text(f"slept {data.seconds}")


async def _failing(data: FailingInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
    await trio.lowlevel.checkpoint()
    raise ToolError(data.message)


def testing_tools(gates: TestingGates) -> list[Tool[Any]]:
    """``echo``, ``gated``, ``slow`` and ``failing`` (``gated`` waits on *gates*)."""

    async def gated(data: GatedInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        gates.started.append(data.key)
        await gates.event(data.key).wait()
        return _text(f"opened {data.key}")

    tools: list[Tool[Any]] = [
        Tool(name="echo", description="Return the text.", input_type=EchoInput, handler=_echo),
        Tool(name="gated", description="Wait for a gate.", input_type=GatedInput, handler=gated),
        Tool(name="slow", description="Sleep, then answer.", input_type=SlowInput, handler=_slow),
        Tool(name="failing", description="Fail.", input_type=FailingInput, handler=_failing),
    ]
    return tools


def testing_registry(
    env: ToolEnvironment, *, gates: TestingGates | None = None
) -> tuple[ToolRegistry, TestingGates]:
    """A registry holding the testing tools, and the gates of its ``gated`` tool."""
    gates = gates or TestingGates()
    registry = ToolRegistry(env)
    registry.contribute(testing_tools(gates))
    return registry, gates


testing_registry.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
testing_tools.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
