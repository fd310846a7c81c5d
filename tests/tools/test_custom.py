from runtime.agents import BUILD
from runtime.llm import TextPart
from runtime.tools import (
    ToolContext,
    ToolEnvironment,
    ToolRegistry,
    ToolSuccess,
    load_custom_tools,
)

SHOUT = """
from __future__ import annotations

import msgspec

from runtime.llm import TextPart
from runtime.tools import Tool, ToolOutput


class ShoutInput(msgspec.Struct, frozen=True, kw_only=True):
    text: str


async def shout(data: ShoutInput, ctx, env) -> ToolOutput:
    return ToolOutput(content=[TextPart(text=data.text.upper() + " in " + ctx.session_id)])


shout_tool = Tool(name="shout", description="Shout.", input_type=ShoutInput, handler=shout)
"""


async def test_custom_tools_load_from_the_location(tmp_path):
    folder = tmp_path / ".kittiwake" / "tool"
    folder.mkdir(parents=True)
    (folder / "shout.py").write_text(SHOUT)
    (folder / "broken.py").write_text("raise RuntimeError('nope')\n")
    (folder / "empty.py").write_text("x = 1\n")
    loaded = load_custom_tools(str(tmp_path))
    assert [t.name for t in loaded.tools] == ["shout"]
    assert len(loaded.diagnostics) == 2
    assert any("RuntimeError: nope" in d for d in loaded.diagnostics)
    registry = ToolRegistry(ToolEnvironment(directory=str(tmp_path), data_dir=str(tmp_path / "d")))
    with registry.contribute(loaded.tools):
        ctx = ToolContext(
            session_id="ses_9",
            agent="build",
            assistant_message_id="msg_1",
            tool_call_id="call_1",
            directory=str(tmp_path),
        )
        result = await registry.settle("shout", {"text": "hey"}, ctx, agent=BUILD)
    assert result == ToolSuccess(content=[TextPart(text="HEY in ses_9")])
    assert registry.names() == []


def test_no_tool_directory_means_no_tools(tmp_path):
    assert load_custom_tools(str(tmp_path)).tools == []
