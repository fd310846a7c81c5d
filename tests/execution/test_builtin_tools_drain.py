"""An end-to-end drain with the built-in tools: read a file, edit it, run a command."""

from __future__ import annotations

from pathlib import Path

from runtime import AssistantMessage, Location, Prompt, llm, open_runtime
from runtime import messages as m
from tests.execution.conftest import answer, tool_calls


def _last_tool_text(request: llm.LLMRequest) -> str:
    result = [x for x in request.messages if isinstance(x, llm.ToolMessage)][-1].content[0]
    return "".join(p.text for p in result.content if isinstance(p, llm.TextPart))


async def test_the_model_reads_edits_and_runs_a_command(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "greet.sh").write_text("echo hello world\n")
    client = llm.ScriptedLLM(
        [
            tool_calls(("r", "read", {"filePath": "greet.sh"})),
            tool_calls(
                (
                    "e",
                    "edit",
                    {"filePath": "greet.sh", "oldString": "world", "newString": "kittiwake"},
                )
            ),
            tool_calls(("s", "shell", {"command": "sh greet.sh"})),
            answer("It prints hello kittiwake."),
        ]
    )
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        info = await rt.sessions.create(location=Location(directory=str(work)))
        await rt.sessions.prompt(info.id, prompt=Prompt(text="fix the greeting and run it"))
        await rt.sessions.wait_idle(info.id)
        context = await rt.sessions.context(info.id)

    assert len(client.requests) == 4
    assert "echo hello world" in _last_tool_text(client.requests[1])
    assert (work / "greet.sh").read_text() == "echo hello kittiwake\n"
    assert "hello kittiwake" in _last_tool_text(client.requests[3])
    tools = [
        part
        for x in context
        if isinstance(x, AssistantMessage)
        for part in x.content
        if isinstance(part, m.AssistantTool)
    ]
    assert [t.name for t in tools] == ["read", "edit", "shell"]
    assert all(isinstance(t.state, m.ToolCompleted) for t in tools)
