import msgspec
import pytest
import trio
import trio.testing

from runtime.agents import BUILD, AgentInfo
from runtime.llm import TextPart, ToolDefinition
from runtime.tools import (
    Skill,
    Tool,
    ToolContext,
    ToolEnvironment,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    ToolSettlement,
    ToolSuccess,
    skill_tool,
)
from runtime.tools.testing import EchoInput, testing_registry


def _ctx(tmp_path, call="call_1") -> ToolContext:
    return ToolContext(
        session_id="ses_1",
        agent="build",
        assistant_message_id="msg_1",
        tool_call_id=call,
        directory=str(tmp_path),
    )


def _env(tmp_path) -> ToolEnvironment:
    return ToolEnvironment(directory=str(tmp_path), data_dir=str(tmp_path / "data"))


async def test_echo_settles_success(tmp_path):
    registry, _ = testing_registry(_env(tmp_path))
    result = await registry.settle("echo", {"text": "hi"}, _ctx(tmp_path), agent=BUILD)
    assert result == ToolSuccess(content=[TextPart(text="hi")])


async def test_settlement_round_trips_as_tagged_union(tmp_path):
    registry, _ = testing_registry(_env(tmp_path))
    result = await registry.settle("failing", {"message": "boom"}, _ctx(tmp_path), agent=BUILD)
    encoded = msgspec.json.encode(result)
    assert msgspec.json.decode(encoded)["type"] == "failed"
    assert msgspec.json.decode(encoded, type=ToolSettlement) == ToolFailure(error="boom")


async def test_unknown_tool(tmp_path):
    registry, _ = testing_registry(_env(tmp_path))
    result = await registry.settle("nope", {}, _ctx(tmp_path), agent=BUILD)
    assert result == ToolFailure(error="Unknown tool: nope")


async def test_invalid_input_does_not_execute(tmp_path):
    registry, gates = testing_registry(_env(tmp_path))
    result = await registry.settle("gated", {"key": 5}, _ctx(tmp_path), agent=BUILD)
    assert isinstance(result, ToolFailure)
    assert result.error.startswith("Invalid tool input for gated")
    assert gates.started == []


async def test_stale_tool_call_when_contribution_closes_in_flight(tmp_path):
    registry = ToolRegistry(_env(tmp_path))
    _, gates = testing_registry(_env(tmp_path))
    from runtime.tools.testing import testing_tools

    contribution = registry.contribute(testing_tools(gates))
    results: list[ToolSettlement] = []

    async def call() -> None:
        results.append(await registry.settle("gated", {"key": "k"}, _ctx(tmp_path), agent=BUILD))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await trio.testing.wait_all_tasks_blocked()
        assert gates.started == ["k"]
        contribution.close()
    assert results == [ToolFailure(error="Stale tool call: gated")]
    assert registry.lookup("gated") is None
    later = await registry.settle("gated", {"key": "k"}, _ctx(tmp_path), agent=BUILD)
    assert later == ToolFailure(error="Unknown tool: gated")


async def test_cancel_propagates_from_settle(tmp_path):
    registry, gates = testing_registry(_env(tmp_path))
    with trio.move_on_after(0.05) as scope:
        await registry.settle("gated", {"key": "never"}, _ctx(tmp_path), agent=BUILD)
    assert scope.cancelled_caught
    assert registry.statistics().in_flight == 0


async def test_concurrent_settles_are_independent(tmp_path):
    registry, gates = testing_registry(_env(tmp_path))
    results: dict[str, ToolSettlement] = {}

    async def call(key: str) -> None:
        results[key] = await registry.settle("gated", {"key": key}, _ctx(tmp_path), agent=BUILD)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, "a")
        nursery.start_soon(call, "b")
        await trio.testing.wait_all_tasks_blocked()
        assert registry.statistics().in_flight == 2
        gates.open("b")
        await trio.testing.wait_all_tasks_blocked()
        assert "b" in results and "a" not in results
        gates.open("a")
    assert results["a"] == ToolSuccess(content=[TextPart(text="opened a")])


async def test_definitions_follow_contributions_and_agent_switches(tmp_path):
    registry, _ = testing_registry(_env(tmp_path))
    names = [d.name for d in registry.definitions(BUILD)]
    assert names == ["echo", "failing", "gated", "slow"]
    no_echo = AgentInfo(name="quiet", tools={"echo": False})
    assert "echo" not in [d.name for d in registry.definitions(no_echo)]
    result = await registry.settle("echo", {"text": "x"}, _ctx(tmp_path), agent=no_echo)
    assert result == ToolFailure(error="Tool echo is not enabled for agent quiet")
    echo = registry.definitions(BUILD)[0]
    assert isinstance(echo, ToolDefinition)
    assert echo.input_schema["type"] == "object"
    assert echo.input_schema["required"] == ["text"]


async def test_definitions_kept_per_agent_follow_contributions(tmp_path):
    registry, _ = testing_registry(_env(tmp_path))
    first = registry.definitions(BUILD)
    first.clear()  # callers get their own list
    again = registry.definitions(BUILD)
    assert [d.name for d in again] == ["echo", "failing", "gated", "slow"]
    assert again[0] is registry.definitions(BUILD)[0]  # kept, not rebuilt

    async def shout(data: EchoInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        return ToolOutput(content=[TextPart(text=data.text.upper())])

    loud = Tool(name="echo", description="Shout.", input_type=EchoInput, handler=shout)
    with registry.contribute(
        [loud, Tool(name="zz", description="Z.", input_type=EchoInput, handler=shout)]
    ):
        during = registry.definitions(BUILD)
        assert [d.name for d in during][-1] == "zz"
        assert during[0].description == "Shout."
    assert [d.name for d in registry.definitions(BUILD)] == ["echo", "failing", "gated", "slow"]
    assert registry.definitions(BUILD)[0].description != "Shout."


async def test_later_contribution_shadows_until_closed(tmp_path):
    registry, _ = testing_registry(_env(tmp_path))

    async def shout(data: EchoInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        return ToolOutput(content=[TextPart(text=data.text.upper())])

    with registry.contribute(
        Tool(name="echo", description="Shout.", input_type=EchoInput, handler=shout)
    ):
        loud = await registry.settle("echo", {"text": "hi"}, _ctx(tmp_path), agent=BUILD)
    quiet = await registry.settle("echo", {"text": "hi"}, _ctx(tmp_path), agent=BUILD)
    assert loud.content == [TextPart(text="HI")]
    assert quiet.content == [TextPart(text="hi")]


async def test_a_sessions_own_contribution_is_offered_to_it_and_found_by_it_alone(tmp_path):
    registry, _ = testing_registry(_env(tmp_path))

    async def shout(data: EchoInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        return ToolOutput(content=[TextPart(text=data.text.upper())])

    own = registry.contribute(
        [
            Tool(name="echo", description="Shout.", input_type=EchoInput, handler=shout),
            Tool(name="mine", description="Mine.", input_type=EchoInput, handler=shout),
        ],
        session_id="ses_1",
    )  # fmt: skip
    offered = registry.definitions(BUILD, "ses_1")
    assert [d.name for d in offered] == ["echo", "failing", "gated", "mine", "slow"]
    assert offered[0].description == "Shout."  # shadows the Location's echo
    assert [d.name for d in registry.definitions(BUILD, "ses_2")] == [
        "echo", "failing", "gated", "slow",
    ]  # fmt: skip
    assert "mine" not in registry.names()
    other = msgspec.structs.replace(_ctx(tmp_path), session_id="ses_2")
    mine = await registry.settle("mine", {"text": "hi"}, _ctx(tmp_path), agent=BUILD)
    theirs = await registry.settle("mine", {"text": "hi"}, other, agent=BUILD)
    assert mine == ToolSuccess(content=[TextPart(text="HI")])
    assert theirs == ToolFailure(error="Unknown tool: mine")
    own.close()
    assert [d.name for d in registry.definitions(BUILD, "ses_1")] == [
        "echo", "failing", "gated", "slow",
    ]  # fmt: skip
    gone = await registry.settle("mine", {"text": "hi"}, _ctx(tmp_path), agent=BUILD)
    assert gone == ToolFailure(error="Unknown tool: mine")


async def test_handler_bug_and_bad_output_become_failures(tmp_path):
    registry = ToolRegistry(_env(tmp_path))

    async def broken(data: EchoInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        raise RuntimeError("kaput")

    async def wrong(data: EchoInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        return ToolOutput(structured={"n": "not an int"})

    registry.contribute(
        [
            Tool(name="broken", description="", input_type=EchoInput, handler=broken),
            Tool(
                name="wrong",
                description="",
                input_type=EchoInput,
                handler=wrong,
                output_type=dict[str, int],
            ),
        ]
    )
    broke = await registry.settle("broken", {"text": ""}, _ctx(tmp_path), agent=BUILD)
    bad = await registry.settle("wrong", {"text": ""}, _ctx(tmp_path), agent=BUILD)
    assert broke == ToolFailure(error="kaput")
    assert isinstance(bad, ToolFailure) and bad.error.startswith("Invalid tool output for wrong")


def test_tool_name_is_validated():
    async def handler(data: EchoInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        return ToolOutput()

    with pytest.raises(ValueError, match="Invalid tool name"):
        Tool(name="9lives", description="", input_type=EchoInput, handler=handler)
    with pytest.raises(ValueError, match="Invalid tool name"):
        Tool(name="a" * 65, description="", input_type=EchoInput, handler=handler)


async def test_oversized_failure_message_is_bounded(tmp_path):
    registry, _ = testing_registry(_env(tmp_path))
    message = "bad line\n" * 5000
    result = await registry.settle("failing", {"message": message}, _ctx(tmp_path), agent=BUILD)
    assert isinstance(result, ToolFailure)
    assert result.error.startswith("bad line\n") and len(result.error.split("\n")) <= 2000
    assert "... error message truncated ..." in result.error


def test_the_skill_listing_escapes_markup_in_names_and_descriptions():
    odd = Skill(name="a&b", description='<b> "bold" & more', location="/x/SKILL.md", content="")
    listing = skill_tool(lambda: {odd.name: odd}).definition(BUILD).description
    assert (
        "  <skill>\n    <name>a&amp;b</name>\n"
        '    <description>&lt;b&gt; "bold" &amp; more</description>\n  </skill>'
    ) in listing
