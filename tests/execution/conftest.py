"""Fixtures for drain tests: a real runtime on a real DuckDB file, a scripted provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from runtime import Location, Prompt, llm, open_runtime
from runtime.tools import ToolEnvironment, ToolRegistry
from runtime.tools._testing import TestingGates, testing_registry


def answer(text: str = "done") -> list[llm.LLMEvent]:
    """A provider turn that answers with *text*."""
    return [
        llm.StepStart(),
        llm.TextStart(id="t1"),
        llm.TextDelta(id="t1", delta=text),
        llm.TextEnd(id="t1"),
        llm.StepFinish(finish_reason="stop", usage=llm.Usage(input_tokens=3, output_tokens=1)),
    ]


def tool_calls(*calls: tuple[str, str, dict[str, Any]]) -> list[llm.LLMEvent]:
    """A provider turn that calls local tools: (call_id, name, input) each."""
    events: list[llm.LLMEvent] = [llm.StepStart()]
    for call_id, name, data in calls:
        events.append(llm.ToolCall(call_id=call_id, name=name, input=data))
    events.append(llm.StepFinish(finish_reason="tool-calls", usage=llm.Usage()))
    return events


class GatedLLM:
    """An LLMClient that replays scripts; a script may hold at a named gate mid-stream.

    ``holds[i] = key`` makes stream call *i* (0-based) wait on ``gates.event(key)``
    after its first event, so tests can act while a provider turn is in flight.
    """

    def __init__(
        self,
        scripts: Sequence[Sequence[llm.LLMEvent]]
        | Callable[[llm.LLMRequest], Sequence[llm.LLMEvent]],
        *,
        holds: dict[int, str] | None = None,
        gates: TestingGates | None = None,
    ) -> None:
        self.scripts = scripts
        self.holds = holds or {}
        self.gates = gates or TestingGates()
        self.requests: list[llm.LLMRequest] = []
        self.in_stream = trio.Event()

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.LLMEvent]:
        index = len(self.requests)
        self.requests.append(request)
        script = self.scripts(request) if callable(self.scripts) else self.scripts[index]
        for position, event in enumerate(script):
            await trio.lowlevel.checkpoint()
            yield event
            if position == 0 and index in self.holds:
                self.in_stream.set()
                await self.gates.event(self.holds[index]).wait()


def user_texts(request: llm.LLMRequest) -> list[str]:
    """The text of every user message in *request*, in order."""
    return [
        part.text
        for message in request.messages
        if isinstance(message, llm.UserMessage)
        for part in message.content
        if isinstance(part, llm.TextPart)
    ]


def roles(request: llm.LLMRequest) -> list[str]:
    return [type(message).__name__ for message in request.messages]


@asynccontextmanager
async def running(
    tmp_path: Path, client: llm.LLMClient, gates: TestingGates | None = None, **options: Any
) -> AsyncIterator[Any]:
    """A runtime whose Locations hold the testing tools, plus one session in *tmp_path*."""
    shared = gates or TestingGates()

    def tools(env: ToolEnvironment) -> ToolRegistry:
        return testing_registry(env, gates=shared)[0]

    async with open_runtime(data_dir=tmp_path / "data", llm=client, tools=tools, **options) as rt:
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        info = await rt.sessions.create(location=Location(directory=str(work)))
        rt.test_session = info.id
        rt.test_gates = shared
        yield rt


def prompt(text: str) -> Prompt:
    return Prompt(text=text)


async def eventually(predicate: Callable[[], bool]) -> None:
    """Wait until *predicate* holds, checking every 10 ms; fail after 5 seconds."""
    with trio.fail_after(5):
        while not predicate():  # noqa: ASYNC110 - polling a plain condition in a test
            await trio.sleep(0.01)


def request_problems(request: llm.LLMRequest) -> list[str]:
    """Why a provider would reject *request*'s history, or ``[]`` when it would accept it:
    every local tool call answered by the tool message right after it, no empty
    assistant message."""
    problems: list[str] = []
    messages = request.messages
    for index, message in enumerate(messages):
        if not isinstance(message, llm.AssistantMessage):
            continue
        if not any(
            isinstance(part, llm.ToolCallPart) or getattr(part, "text", "")
            for part in message.content
        ):
            problems.append(f"message {index}: empty assistant message")
        calls = {
            part.call_id
            for part in message.content
            if isinstance(part, llm.ToolCallPart) and not part.provider_executed
        }
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = (
            {part.call_id for part in following.content}
            if isinstance(following, llm.ToolMessage)
            else set()
        )
        if calls - answered:
            problems.append(
                f"message {index}: tool calls without results {sorted(calls - answered)}"
            )
    return problems
