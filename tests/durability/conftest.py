"""Fixtures for the durability tests: scripted providers and store inspection."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime.llm import (
    LLMEvent,
    LLMRequest,
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
from storage import EventStore


def _answer(text: str) -> list[LLMEvent]:
    return [
        StepStart(),
        TextStart(id="t1"),
        TextDelta(id="t1", delta=text),
        TextEnd(id="t1"),
        StepFinish(finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=2)),
    ]


def _echo_then_answer(request: LLMRequest) -> Sequence[LLMEvent]:
    """Call ``echo`` on a fresh user prompt; answer once the tool result came back."""
    if isinstance(request.messages[-1], ToolMessage):
        return _answer("echoed")
    call = ToolCall(call_id=f"call_{len(request.messages)}", name="echo", input={"text": "ping"})
    return [StepStart(), call, StepFinish(finish_reason="tool-calls", usage=Usage())]


@pytest.fixture
def answer() -> Callable[[str], list[LLMEvent]]:
    """A provider script answering with one text part."""
    return _answer


@pytest.fixture
def echo_script() -> Callable[[LLMRequest], Sequence[LLMEvent]]:
    """A callable provider script: one ``echo`` tool round trip, then a text answer."""
    return _echo_then_answer


@pytest.fixture
def testing_tools() -> Callable[[ToolEnvironment], ToolRegistry]:
    """The tools factory holding the deterministic testing tools."""
    return lambda env: testing_registry(env)[0]


class Inspect:
    """Reads a closed data dir through a fresh ``EventStore`` (one process owns the file)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def __enter__(self) -> EventStore:
        self.store = EventStore.open(self.data_dir)
        return self.store

    def __exit__(self, *exc: Any) -> None:
        self.store.close()


@pytest.fixture
def inspect() -> Callable[[Path], Inspect]:
    return Inspect


def assert_contiguous(store: EventStore) -> dict[str, int]:
    """Every aggregate's seqs run 0..n-1 with no gap; return event counts per session."""
    rows = store.conn.execute(
        "select aggregate_id, count(*), min(seq), max(seq), count(distinct seq) "
        "from event group by aggregate_id"
    ).fetchall()
    for aggregate, count, low, high, distinct in rows:
        assert (low, high, distinct) == (0, count - 1, count), aggregate
    return {str(r[0]): int(r[1]) for r in rows}


@pytest.fixture
def contiguous() -> Callable[[EventStore], dict[str, int]]:
    return assert_contiguous
