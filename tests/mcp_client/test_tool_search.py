"""MCP tool search: past the threshold the model gets ``mcp_search`` instead of the MCP
tools' definitions, and the tools it found are offered from then on, durably (a real
DuckDB file reopened by a new runtime)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from actors.api import fork_session
from runtime import IdGenerator
from runtime.llm import LLMRequest, ScriptedLLM, TextPart, ToolDefinition, ToolMessage
from runtime.mcp import SEARCH_TOOL
from runtime.mcp._search import rank_tools
from tests.execution.conftest import answer, prompt, tool_calls
from tests.mcp_client.conftest import connected, local, mcp_runtime, new_session

BASE_TOOLS = 12
"""The tools the test server lists besides its ledgers."""


def servers(*ledgers: int) -> dict[str, Any]:
    """An ``mcp`` configuration of one test server per count, each listing that many
    ledger tools besides its own."""
    return {
        f"s{n}": local(environment={"MCP_TOOLS": str(count)}) for n, count in enumerate(ledgers, 1)
    }


def mcp_names(request: LLMRequest) -> set[str]:
    return {t.name for t in request.tools if t.name[:2] in ("s1", "s2", "s3")}


def size(request: LLMRequest) -> int:
    return len(msgspec.json.encode(request.tools))


async def settled_servers(rt, work: Path, count: int) -> None:
    for n in range(1, count + 1):
        await connected(rt, work, f"s{n}")


async def test_300_tools_are_searched_for_and_the_found_ones_offered_and_called(tmp_path: Path):
    client = ScriptedLLM([
        tool_calls(("c1", SEARCH_TOOL, {"query": "s2_ledger_042"})),
        tool_calls(("c2", "s2_ledger_042", {"key": "gulls"})),
        answer("found it"),
    ])  # fmt: skip
    config = {"mcp": servers(96, 96, 96)}  # 3 x (96 + 12) = 324 tools
    async with mcp_runtime(tmp_path / "many", config, client) as (rt, work):
        await settled_servers(rt, work, 3)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("look it up"))
        await rt.sessions.wait_idle(sid)
        location = await rt.execution.location(str(work))
        assert len(location.mcp._contributed) == 3 * (96 + BASE_TOOLS)
    first, second, third = client.requests
    assert SEARCH_TOOL in {t.name for t in first.tools}
    assert mcp_names(first) == set()
    search = next(t for t in first.tools if t.name == SEARCH_TOOL)
    assert "s1 (108 tools)" in search.description
    (found,) = [p for x in second.messages if isinstance(x, ToolMessage) for p in x.content]
    assert not found.is_error
    text = "".join(c.text for c in found.content if isinstance(c, TextPart))
    assert '"name":"s2_ledger_042"' in text and '"input_schema"' in text
    assert mcp_names(second) == {"s2_ledger_042"}
    assert mcp_names(third) == {"s2_ledger_042"}
    called = [p for x in third.messages if isinstance(x, ToolMessage) for p in x.content]
    assert "ledger 42: gulls" in "".join(c.text for c in called[-1].content)

    few = ScriptedLLM([answer("few")])
    async with mcp_runtime(tmp_path / "few", {"mcp": servers(40 - BASE_TOOLS)}, few) as (rt, work):
        await settled_servers(rt, work, 1)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("hi"))
        await rt.sessions.wait_idle(sid)
    (forty,) = few.requests
    assert len(mcp_names(forty)) == 40 and SEARCH_TOOL not in {t.name for t in forty.tools}
    assert size(first) <= size(forty)


async def test_the_found_tools_survive_a_restart(tmp_path: Path):
    config = {"mcp": servers(50)}  # 62 tools
    client = ScriptedLLM([
        tool_calls(("c1", SEARCH_TOOL, {"query": "s1_ledger_007"})), answer("found"),
    ])  # fmt: skip
    async with mcp_runtime(tmp_path, config, client) as (rt, work):
        await settled_servers(rt, work, 1)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("find"))
        await rt.sessions.wait_idle(sid)
        info = await rt.sessions.get(sid)
    assert info.mcp_tools == ["s1_ledger_007"]
    assert mcp_names(client.requests[1]) == {"s1_ledger_007"}

    again = ScriptedLLM([tool_calls(("c2", "s1_ledger_007", {"key": "k"})), answer("ok")])
    async with mcp_runtime(tmp_path, config, again) as (rt, work):
        await settled_servers(rt, work, 1)
        await rt.sessions.prompt(sid, prompt=prompt("use it"))
        await rt.sessions.wait_idle(sid)
        fork = await fork_session(rt, sid, before=None, max_messages=100, ids=IdGenerator(),
                                  now=1)  # fmt: skip
    assert mcp_names(again.requests[0]) == {"s1_ledger_007"}
    assert fork.mcp_tools == ["s1_ledger_007"]  # a fork keeps what the search found
    assert SEARCH_TOOL in {t.name for t in again.requests[0].tools}
    called = [p for x in again.requests[1].messages if isinstance(x, ToolMessage)
              for p in x.content]  # fmt: skip
    assert "ledger 7: k" in "".join(c.text for c in called[-1].content)


async def test_at_or_under_the_threshold_or_switched_off_every_tool_is_offered(tmp_path: Path):
    config = {"mcp": servers(50), "experimental": {"mcp_tool_search": False}}
    client = ScriptedLLM([answer("all")])
    async with mcp_runtime(tmp_path, config, client) as (rt, work):
        await settled_servers(rt, work, 1)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("hi"))
        await rt.sessions.wait_idle(sid)
    assert len(mcp_names(client.requests[0])) == 62
    assert SEARCH_TOOL not in {t.name for t in client.requests[0].tools}


async def test_a_lower_threshold_is_configured(tmp_path: Path):
    config = {"mcp": servers(0), "experimental": {"mcp_tool_search": {"threshold": 5}}}
    client = ScriptedLLM([answer("searched")])
    async with mcp_runtime(tmp_path, config, client) as (rt, work):
        await settled_servers(rt, work, 1)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("hi"))
        await rt.sessions.wait_idle(sid)
    assert mcp_names(client.requests[0]) == set()
    assert SEARCH_TOOL in {t.name for t in client.requests[0].tools}


def test_ranking_puts_exact_names_first_then_words_of_names_then_descriptions():
    def tool(name: str, description: str) -> ToolDefinition:
        return ToolDefinition(name=name, description=description, input_schema={})

    tools = [
        tool("gh_create_issue", "Open an issue."),
        tool("gh_list_issues", "List the issues of a repository."),
        tool("jira_search", "Find issues in Jira."),
        tool("files_read", "Read a file."),
    ]
    assert [t.name for t in rank_tools("files_read", tools, 5)] == ["files_read"]
    assert [t.name for t in rank_tools("create issue", tools, 5)] == [
        "gh_create_issue", "gh_list_issues", "jira_search",
    ]  # fmt: skip
    assert [t.name for t in rank_tools("issues", tools, 1)] == ["gh_list_issues"]
    assert rank_tools("weather", tools, 5) == []
