"""Every tool call passes one choke point: built-in, custom, MCP and a subagent's calls are
all seen by ``tool_execute_before``/``after`` and ``permission_ask``; hooks change input,
refuse, change output and decide permissions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from runtime import AssistantMessage
from runtime import messages as m
from runtime.llm import ScriptedLLM, TextPart, ToolMessage
from runtime.plugins import Refusal, ToolOutput, hookimpl
from tests.execution.conftest import answer, prompt, tool_calls, user_texts
from tests.execution.test_task_tool import task
from tests.mcp_client.conftest import connected, local, mcp_runtime
from tests.plugins.conftest import Recorder, plugin_runtime, session

CUSTOM_TOOL = """
import msgspec
from runtime.llm import TextPart
from runtime.tools import Tool, ToolOutput

class Input(msgspec.Struct):
    name: str

async def handler(data, ctx, env):
    return ToolOutput(content=[TextPart(text=f"hello {data.name}")])

greet = Tool(name="greet", description="Greet someone", input_type=Input, handler=handler,
             permission="greet")
"""


def results(request: Any) -> list[tuple[str, str, bool]]:
    """(tool, text, is_error) of each tool result the provider was sent last."""
    return [
        (p.name, "".join(c.text for c in p.content if isinstance(c, TextPart)), p.is_error)
        for message in request.messages
        if isinstance(message, ToolMessage)
        for p in message.content
    ]


async def test_built_in_and_custom_tool_calls_pass_the_hooks(tmp_path: Path) -> None:
    recorder = Recorder()
    (tmp_path / "work" / ".kittiwake" / "tool").mkdir(parents=True)
    (tmp_path / "work" / ".kittiwake" / "tool" / "greet.py").write_text(CUSTOM_TOOL)
    (tmp_path / "work" / "notes.txt").write_text("one\n")
    calls = tool_calls(("c1", "read", {"filePath": "notes.txt"}), ("c2", "greet", {"name": "kit"}))
    client = ScriptedLLM([calls, answer()])
    async with plugin_runtime(tmp_path, client, plugins=[recorder]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
    assert sorted((t, s) for t, s, _ in recorder.before) == [("greet", sid), ("read", sid)]
    assert sorted(recorder.after) == [("greet", sid, "ToolOutput"), ("read", sid, "ToolOutput")]
    assert ("read", "read", ["notes.txt"], "allow") in recorder.asked
    assert ("greet", "greet", ["*"], "allow") in recorder.asked  # the permission it declares
    assert [r[1].startswith("hello kit") for r in results(client.requests[1])] == [False, True]


async def test_an_mcp_tool_call_passes_the_hooks(tmp_path: Path) -> None:
    recorder = Recorder()
    client = ScriptedLLM([tool_calls(("c1", "test_add", {"a": 2, "b": 3})), answer()])
    config = {"mcp": {"test": local()}}
    async with mcp_runtime(tmp_path, config, client, plugins=[recorder]) as (rt, work):
        await connected(rt, work)
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("add"))
        await rt.sessions.wait_idle(sid)
    assert recorder.before == [("test_add", sid, {"a": 2, "b": 3})]
    assert recorder.after == [("test_add", sid, "ToolOutput")]
    assert recorder.asked == [("test_add", "test_add", ["*"], "allow")]


async def test_a_subagents_tool_calls_pass_the_hooks(tmp_path: Path) -> None:
    recorder = Recorder()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("a\n")

    def script(request: Any) -> Any:
        answered = isinstance(request.messages[-1], ToolMessage)
        if user_texts(request)[-1] == "look":  # the child: read, then answer
            return (
                answer("found it")
                if answered
                else tool_calls(("k1", "read", {"filePath": "a.txt"}))
            )
        return answer("thanks") if answered else tool_calls(task("c1", "look"))

    async with plugin_runtime(tmp_path, ScriptedLLM(script), plugins=[recorder]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("delegate"))
        await rt.sessions.wait_idle(sid)
        [child] = await rt.sessions.children(sid)
    assert [(t, s) for t, s, _ in recorder.before] == [("task", sid), ("read", child.id)]
    assert ("read", "read", ["a.txt"], "allow") in recorder.asked
    assert ("task", "task", ["explore"], "allow") in recorder.asked


class Policy:
    """Changes ``read``'s path, refuses ``glob``, rewrites ``grep``'s output, denies
    writes outside ``src/`` and lets everything else go."""

    name = "policy"

    @hookimpl
    def tool_execute_before(self, call: Any, args: Any) -> Any:
        if call.tool == "read":
            return {**args, "filePath": "real.txt"}
        if call.tool == "glob":
            return Refusal("globbing is off in this project")
        return None

    @hookimpl
    async def tool_execute_after(self, call: Any, result: Any) -> Any:
        if call.tool == "grep" and isinstance(result, ToolOutput):
            return msgspec.structs.replace(result, content=[TextPart(text="[redacted]")])
        return None

    @hookimpl
    def permission_ask(self, permission: Any) -> str | None:
        if permission.permission == "edit":
            outside = [r for r in permission.resources if not r.startswith("src/")]
            return "deny" if outside else None
        return None


async def test_hooks_change_input_refuse_change_output_and_deny(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "real.txt").write_text("the real one\n")
    calls = tool_calls(
        ("c1", "read", {"filePath": "decoy.txt"}), ("c2", "glob", {"pattern": "*"}),
        ("c3", "grep", {"pattern": "real"}), ("c4", "write", {"filePath": "out.txt", "content": "x"}),
        ("c5", "write", {"filePath": "src/in.txt", "content": "y"}),
    )  # fmt: skip
    client = ScriptedLLM([calls, answer()])
    async with plugin_runtime(tmp_path, client, plugins=[Policy()]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
        history = await rt.sessions.context(sid)
    read, glob, grep, outside, inside = results(client.requests[1])
    assert "the real one" in read[1] and not read[2]
    assert glob[1:] == ("globbing is off in this project", True)
    assert grep[1:] == ("[redacted]", False)
    assert outside[2] and "Permission denied" in outside[1]
    assert not inside[2]
    assert not (work / "out.txt").exists() and (work / "src" / "in.txt").read_text() == "y"
    tools = [p for x in history if isinstance(x, AssistantMessage) for p in x.content
             if isinstance(p, m.AssistantTool)]  # fmt: skip
    assert [type(t.state).__name__ for t in tools] == [
        "ToolCompleted", "ToolError", "ToolCompleted", "ToolError", "ToolCompleted",
    ]  # fmt: skip
