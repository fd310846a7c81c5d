"""MCP servers' tools, prompts and resources through real sessions: the test server
(FastMCP) over stdio and Streamable HTTP, the scripted model at the provider seam."""

from __future__ import annotations

from pathlib import Path

import trio

from actors import Notice
from runtime import AssistantMessage
from runtime import messages as m
from runtime.agents import AgentInfo
from runtime.llm import FilePart, ScriptedLLM, TextPart, ToolMessage, UserMessage
from runtime.tools import ToolContext, ToolFailure
from tests.execution.conftest import answer, prompt, tool_calls
from tests.mcp_client.conftest import (
    SDK_SSE_GENERATORS,
    configure,
    connected,
    http_server,
    lines,
    local,
    mcp_runtime,
    new_session,
)
from tests.waiting import eventually


def results(request) -> list:
    """The tool results the provider was sent last, in order."""
    return [p for x in request.messages if isinstance(x, ToolMessage) for p in x.content]


def text(part) -> str:
    return "".join(c.text for c in part.content if isinstance(c, TextPart))


async def test_stdio_tools_are_offered_called_and_answered(tmp_path: Path):
    calls = tool_calls(("c1", "test_add", {"a": 2, "b": 3}), ("c2", "test_picture", {}))
    client = ScriptedLLM([calls, answer("done")])
    async with mcp_runtime(tmp_path, {"mcp": {"test": local()}}, client) as (rt, work):
        await connected(rt, work)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("add"))
        await rt.sessions.wait_idle(sid)
        history = await rt.sessions.context(sid)
    offered = {t.name: t for t in client.requests[0].tools}
    assert {"test_add", "test_picture", "test_hang", "test_crash"} <= set(offered)
    schema = offered["test_add"].input_schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"a", "b"} and offered["test_add"].description
    added, picture = results(client.requests[1])
    assert (added.name, text(added), added.is_error) == ("test_add", "5", False)
    assert text(picture) == "a red dot"
    image = [c for c in picture.content if isinstance(c, FilePart)]
    assert len(image) == 1 and image[0].mime == "image/png"
    assert image[0].url.startswith("data:image/png;base64,iVBOR")
    tools = [p for x in history if isinstance(x, AssistantMessage) for p in x.content
             if isinstance(p, m.AssistantTool)]  # fmt: skip
    assert [t.name for t in tools] == ["test_add", "test_picture"]
    assert all(isinstance(t.state, m.ToolCompleted) for t in tools)


@SDK_SSE_GENERATORS
async def test_streamable_http_server_tools_are_called(tmp_path: Path):
    client = ScriptedLLM([tool_calls(("c1", "web_add", {"a": 40, "b": 2})), answer("done")])
    async with http_server() as base:
        config = {"mcp": {"web": {"type": "remote", "url": f"{base}/mcp", "oauth": False}}}
        async with mcp_runtime(tmp_path, config, client) as (rt, work):
            await connected(rt, work, "web")
            sid = await new_session(rt, work)
            await rt.sessions.prompt(sid, prompt=prompt("add"))
            await rt.sessions.wait_idle(sid)
    (added,) = results(client.requests[1])
    assert (added.name, text(added), added.is_error) == ("web_add", "42", False)


@SDK_SSE_GENERATORS
async def test_a_server_without_streamable_http_is_reached_over_sse(tmp_path: Path):
    async with http_server("sse") as base:
        config = {"mcp": {"old": {"type": "remote", "url": f"{base}/sse", "oauth": False}}}
        async with mcp_runtime(tmp_path, config, ScriptedLLM([])) as (rt, work):
            server = await connected(rt, work, "old")
            assert (await server.call("add", {"a": 1, "b": 1}))["content"][0]["text"] == "2"


async def test_a_hanging_call_times_out_is_cancelled_and_the_turn_goes_on(tmp_path: Path):
    client = ScriptedLLM([tool_calls(("c1", "test_hang", {})), answer("went on")])
    config = {"mcp": {"test": local(timeout=500)}}
    async with mcp_runtime(tmp_path, config, client) as (rt, work):
        server = await connected(rt, work)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("hang"))
        await rt.sessions.wait_idle(sid)
        cancelled = await server.call("cancelled_requests", {})
    (hung,) = results(client.requests[1])
    assert hung.is_error
    assert "MCP error -32001: Request timed out: test did not answer hang within 0.5 s" in text(
        hung
    )
    assert len(client.requests) == 2  # the turn went on to its answer
    assert len(cancelled["structuredContent"]["result"]) == 1  # notifications/cancelled came


async def test_progress_notifications_restart_the_timeout(tmp_path: Path):
    client = ScriptedLLM([tool_calls(("c1", "test_slow", {"steps": 4})), answer("done")])
    config = {"mcp": {"test": local(timeout=700)}}  # 4 steps of 0.3 s: 1.2 s in all
    async with mcp_runtime(tmp_path, config, client) as (rt, work):
        server = await connected(rt, work)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("slow"))
        await rt.sessions.wait_idle(sid)
    (slow,) = results(client.requests[1])
    assert (text(slow), slow.is_error) == ("slept 4 steps", False)
    assert server.statistics().progress == 4


async def test_an_interrupt_sends_notifications_cancelled_and_interrupts_the_tool(
    tmp_path: Path,
):
    client = ScriptedLLM([tool_calls(("c1", "test_hang", {})), answer("later")])
    async with mcp_runtime(tmp_path, {"mcp": {"test": local()}}, client) as (rt, work):
        server = await connected(rt, work)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("hang"))
        await eventually(lambda: server.statistics().progress == 1)  # the tool is running
        with trio.fail_after(10):
            await rt.sessions.interrupt(sid)
        cancelled = await server.call("cancelled_requests", {})
        history = await rt.sessions.context(sid)
    assert len(cancelled["structuredContent"]["result"]) == 1
    assert server.statistics().cancelled == 1
    (tool,) = [p for x in history if isinstance(x, AssistantMessage) for p in x.content
               if isinstance(p, m.AssistantTool)]  # fmt: skip
    assert isinstance(tool.state, m.ToolError)
    assert tool.state.error.message == "Tool execution interrupted"


async def test_a_crashed_server_is_reconnected(tmp_path: Path, record: Path):
    client = ScriptedLLM([
        tool_calls(("c1", "test_crash", {})), answer("it crashed"),
        tool_calls(("c2", "test_add", {"a": 1, "b": 2})), answer("back"),
    ])  # fmt: skip
    async with mcp_runtime(tmp_path, {"mcp": {"test": local(record)}}, client) as (rt, work):
        await connected(rt, work)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("crash"))
        await rt.sessions.wait_idle(sid)
        server = await connected(rt, work, starts=2)
        await rt.sessions.prompt(sid, prompt=prompt("again"))
        await rt.sessions.wait_idle(sid)
    (crashed,) = results(client.requests[1])
    assert (
        crashed.is_error
        and text(crashed) == "MCP server test closed the connection during the call"
    )
    assert text(results(client.requests[3])[-1]) == "3"
    assert server.statistics().starts == 2
    starts = [line for line in lines(record) if '"start"' in line]
    assert len(starts) == 2


async def test_a_changed_tool_list_is_published_and_offered_at_the_next_turn(tmp_path: Path):
    client = ScriptedLLM([tool_calls(("c1", "test_grow", {})), answer("grew"), answer("ok")])
    async with mcp_runtime(tmp_path, {"mcp": {"test": local()}}, client) as (rt, work):
        server = await connected(rt, work)
        sid = await new_session(rt, work)
        with rt.hub.subscribe(None) as sub:
            await rt.sessions.prompt(sid, prompt=prompt("grow"))
            with trio.fail_after(10):
                while not isinstance(item := await sub.receive(), Notice):
                    pass
        await rt.sessions.wait_idle(sid)
        await eventually(lambda: server.tools_changed == 1)
        await rt.sessions.prompt(sid, prompt=prompt("next"))
        await rt.sessions.wait_idle(sid)
    assert (item.type, item.properties, item.directory) == (
        "mcp.tools.changed", {"server": "test"}, str(work),
    )  # fmt: skip
    assert "test_extra" not in {t.name for t in client.requests[0].tools}
    assert "test_extra" in {t.name for t in client.requests[2].tools}


async def test_a_prompt_runs_as_a_slash_command_with_its_arguments(tmp_path: Path):
    client = ScriptedLLM([answer("reviewed")])
    async with mcp_runtime(tmp_path, {"mcp": {"test": local()}}, client) as (rt, work):
        await connected(rt, work)
        sid = await new_session(rt, work)
        listed = {c.name: c for c in await rt.tools.commands.list(str(work))}
        await rt.tools.commands.run(sid, "test:review", "app.py 'error handling'")
        await rt.sessions.wait_idle(sid)
    command = listed["test:review"]
    assert (command.source, command.hints) == ("mcp", ["$1", "$2"])
    assert command.description == "Review a file with a focus."
    users = [x for x in client.requests[0].messages if isinstance(x, UserMessage)]
    assert "Please review app.py, looking for error handling." in users[-1].content[0].text


async def test_permissions_and_tools_switches_key_on_the_tool_id(tmp_path: Path):
    config = {
        "mcp": {"test": local()},
        "permission": {"test_hang": "deny", "test_add": "ask"},
        "tools": {"test_c*": False},
    }
    async with mcp_runtime(tmp_path, config, ScriptedLLM([])) as (rt, work):
        await connected(rt, work)
        location = await rt.execution.current_location(str(work))
        agent: AgentInfo = location.agent(None)
        offered = {d.name for d in location.registry.definitions(agent)}
        ctx = ToolContext(session_id="ses_x", agent=agent.name, assistant_message_id="msg_x",
                          tool_call_id="call_x", directory=str(work))  # fmt: skip
        asked = await location.registry.settle("test_add", {"a": 1, "b": 1}, ctx, agent=agent)
    assert "test_add" in offered and "test_shout" in offered
    assert not {"test_hang", "test_crash", "test_cancelled_requests"} & offered
    assert isinstance(asked, ToolFailure)
    assert asked.error == "Permission required for test_add on *, and nobody can be asked"


async def test_configuration_changes_apply_at_the_next_turn(tmp_path: Path, record: Path):
    client = ScriptedLLM([answer("one"), answer("two"), answer("three")])
    async with mcp_runtime(tmp_path, {"mcp": {"test": local()}}, client) as (rt, work):
        await connected(rt, work)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        configure(work, {"mcp": {"test": {"enabled": False}, "other": local(record)}})
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
        location = await rt.execution.location(str(work))
        await connected(rt, work, "other")
        await rt.sessions.prompt(sid, prompt=prompt("three"))
        await rt.sessions.wait_idle(sid)
        statuses = location.mcp.statuses()
    names = [{t.name for t in r.tools} for r in client.requests]
    assert "test_add" in names[0] and "other_add" not in names[0]
    assert not any(n.startswith(("test_", "other_")) for n in names[1])
    assert "other_add" in names[2] and "test_add" not in names[2]
    assert statuses == {"test": {"status": "disabled"}, "other": {"status": "connected"}}


async def test_a_failure_inside_supervision_fails_the_server_not_the_runtime(
    tmp_path: Path, monkeypatch
):
    import runtime.mcp._server as server_module

    async def broken() -> None:
        raise ImportError("the mcp package is broken")

    monkeypatch.setattr(server_module, "load_sdk", broken)
    client = ScriptedLLM([answer("still here")])
    async with mcp_runtime(tmp_path, {"mcp": {"test": local()}}, client) as (rt, work):
        location = await rt.execution.location(str(work))

        def failed() -> bool:
            server = location.mcp.servers.get("test")
            return server is not None and "internal error" in (server.error or "")

        await eventually(failed)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("hi"))
        await rt.sessions.wait_idle(sid)
        server = location.mcp.servers["test"]
        assert server.status == "failed"
        assert "ImportError('the mcp package is broken')" in (server.error or "")
    assert len(client.requests) == 1
