"""Fixtures for drain tests: a real runtime on a real DuckDB file, a scripted provider."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from runtime import AssistantMessage, Location, Prompt, llm, open_runtime
from runtime import messages as m
from runtime.tools import ToolEnvironment, ToolRegistry
from runtime.tools.testing import TestingGates, testing_registry
from storage import JournalFiles
from tests.provider_rules import request_problems as request_problems  # one copy of the rules
from tests.waiting import eventually as eventually
from tests.waiting import published as published

_KILL_CHILD = Path(__file__).with_name("kill_child.py")


def answer(text: str = "done") -> list[llm.LLMEvent]:
    """A provider turn that answers with *text*."""
    return [
        llm.StepStart(),
        llm.TextStart(id="t1"),
        llm.TextDelta(id="t1", delta=text),
        llm.TextEnd(id="t1"),
        llm.StepFinish(finish_reason="stop", usage=llm.Usage(input_tokens=3, output_tokens=1)),
    ]


class OneFailedSync(JournalFiles):
    """The journal's file operations; armed, the next fdatasync fails after the write
    (the pages reached the file: the restarted store replays the record)."""

    def __init__(self) -> None:
        self.armed = False

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        if self.armed:
            self.armed = False
            raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)


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


def run_child_until_cut(data: Path, work: Path, *, queue: bool = True) -> None:
    """Run ``kill_child.py`` until its tool runs (and, with *queue*, a queued prompt is
    admitted), then SIGKILL it: session ``ses_kill`` is left with a turn cut mid-tool."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    flags = [] if queue else ["--no-queue"]
    child = subprocess.Popen(
        [sys.executable, str(_KILL_CHILD), str(data), str(work), *flags],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    lines = []
    last = "QUEUED" if queue else "TOOL"
    for line in child.stdout:
        lines.append(line.split()[0])
        if lines[-1] == last:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    child.stdout.close()
    assert lines == ["TOOL", "QUEUED"][: len(lines)] and lines[-1] == last, lines


def cut_tool_and_step(history: list[m.SessionMessage]) -> m.AssistantMessage:
    """The one assistant message of the cut turn, checked closed as an interrupt leaves
    it: the tool failed "Tool execution interrupted", finish and time.completed set."""
    cut = [x for x in history if isinstance(x, AssistantMessage) and x.content]
    tools = [p for p in cut[0].content if isinstance(p, m.AssistantTool)]
    assert len(tools) == 1 and isinstance(tools[0].state, m.ToolError)
    assert tools[0].state.error.message == "Tool execution interrupted"
    assert cut[0].finish == "interrupted"
    assert isinstance(cut[0].time.completed, int)
    return cut[0]
