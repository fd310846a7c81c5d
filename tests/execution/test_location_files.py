"""A Location's own agents and tools: .kittiwake/agent/*.md and .kittiwake/tool/*.py."""

from __future__ import annotations

from pathlib import Path

from runtime import Location, Prompt, llm, open_runtime
from tests.execution.conftest import answer, tool_calls

AGENT = """---
description: Reviews changes without editing them.
steps: 4
---
You review code. Never edit files.
"""

TOOL = """
import msgspec
from runtime.llm import TextPart
from runtime.tools import Tool, ToolOutput


class ShoutInput(msgspec.Struct, frozen=True):
    text: str


async def shout(data, ctx, env):
    return ToolOutput(content=[TextPart(text=data.text.upper() + "!")])


SHOUT = Tool(name="shout", description="Shout the text.", input_type=ShoutInput, handler=shout)
"""


async def test_a_project_agent_and_tool_are_used_by_the_drain(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".kittiwake" / "agent").mkdir(parents=True)
    (work / ".kittiwake" / "tool").mkdir(parents=True)
    (work / ".kittiwake" / "agent" / "reviewer.md").write_text(AGENT)
    (work / ".kittiwake" / "tool" / "shout.py").write_text(TOOL)
    client = llm.ScriptedLLM([tool_calls(("c1", "shout", {"text": "hi"})), answer()])
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        info = await rt.sessions.create(location=Location(directory=str(work)))
        await rt.sessions.switch_agent(info.id, "reviewer")
        await rt.sessions.prompt(info.id, prompt=Prompt(text="look"))
        await rt.sessions.wait_idle(info.id)
    first, second = client.requests
    assert first.system[0].strip() == "You review code. Never edit files."
    assert "shout" in [tool.name for tool in first.tools]
    result = [m for m in second.messages if isinstance(m, llm.ToolMessage)][-1]
    text = result.content[0].content[0]
    assert isinstance(text, llm.TextPart) and text.text == "HI!"


async def test_the_runtime_sweeps_expired_managed_tool_output(tmp_path: Path) -> None:
    import os
    import time

    from tests.execution.conftest import eventually

    output = tmp_path / "data" / "tool-output"
    output.mkdir(parents=True)
    old, fresh, other = output / "tool_old", output / "tool_fresh", output / "notes.txt"
    for path in (old, fresh, other):
        path.write_text("x")
    week_ago = time.time() - 8 * 24 * 3600
    os.utime(old, (week_ago, week_ago))
    os.utime(other, (week_ago, week_ago))
    async with open_runtime(data_dir=tmp_path / "data", llm=llm.ScriptedLLM([])):
        await eventually(lambda: not old.exists())
    assert fresh.exists() and other.exists()


async def test_the_build_agent_sends_the_coding_agent_prompt(tmp_path: Path) -> None:
    from runtime import ModelRef
    from runtime.agents import CODING_PROMPT

    work = tmp_path / "work"
    work.mkdir()
    client = llm.ScriptedLLM([answer(), answer()])
    model = ModelRef(id="claude-sonnet-5", provider_id="anthropic")
    async with open_runtime(data_dir=tmp_path / "data", llm=client, default_model=model) as rt:
        info = await rt.sessions.create(location=Location(directory=str(work)))
        await rt.sessions.prompt(info.id, prompt=Prompt(text="fix the bug"))
        await rt.sessions.wait_idle(info.id)
        await rt.sessions.switch_agent(info.id, "plan")
        await rt.sessions.prompt(info.id, prompt=Prompt(text="plan it"))
        await rt.sessions.wait_idle(info.id)
    build, plan = client.requests
    assert build.model == llm.ModelRef(provider_id="anthropic", model_id="claude-sonnet-5")
    assert len(build.system) == 2  # the agent's prompt, then the Location's System Context
    assert build.system[0].startswith(CODING_PROMPT) and "Prefer `edit`" in build.system[0]
    assert "Working directory" in build.system[1]
    assert "# Plan mode" not in build.system[0] and "# Plan mode" in plan.system[0]
    assert {tool.name for tool in build.tools} >= {"read", "edit", "apply_patch", "shell"}
