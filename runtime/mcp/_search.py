"""Tool search: when a Location's MCP tools are too many to describe to the model at each
turn, it gets one ``mcp_search`` tool instead, and only the tools its searches found (a
durable record of the session, kept by the host) are offered from then on.

The ranking is plain words against names and descriptions (pure): a query naming a tool
exactly finds it first.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import msgspec

from runtime.llm import TextPart, ToolDefinition
from runtime.tools import Tool, ToolContext, ToolEnvironment, ToolError, ToolOutput

__all__ = ["SEARCH_TOOL", "McpSearchInput", "rank_tools", "search_tool"]

SEARCH_TOOL: Final = "mcp_search"
_WORDS: Final = re.compile(r"[a-z0-9]+")


class McpSearchInput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    query: str
    """Words naming what the tool should do (or the exact names of tools, space separated)."""


def rank_tools(
    query: str, candidates: Sequence[ToolDefinition], limit: int
) -> list[ToolDefinition]:
    """The at most *limit* of *candidates* that *query* matches best: the tools it names
    exactly (by words of it, separated by spaces or commas) if it names any; else ranked
    by how many of its words are words of the name (3 each), inside the name (2) or in
    the description (1), ties by name."""
    text = query.lower()
    exact = set(text.replace(",", " ").split())
    named = [d for d in candidates if d.name.lower() in exact]
    if named:
        return named[:limit]
    terms = _WORDS.findall(text)
    scored: list[tuple[int, str, ToolDefinition]] = []
    for definition in candidates:
        name = definition.name.lower()
        words = set(_WORDS.findall(name))
        description = definition.description.lower()
        score = 0
        for term in terms:
            if term in words:
                score += 3
            elif term in name:
                score += 2
            elif term in description:
                score += 1
        if score:
            scored.append((-score, definition.name, definition))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [definition for _, _, definition in scored[:limit]]


def _description(servers: dict[str, int]) -> str:
    listed = ", ".join(f"{name} ({count} tools)" for name, count in sorted(servers.items()))
    return (
        "Search the tools of this project's MCP servers, which are too many to list here: "
        f"{listed}. Give words naming what the tool should do (or exact tool names); the "
        "answer lists the matching tools with their descriptions and input schemas, and "
        "those tools can be called from your next step on. Search again for other tools."
    )


def search_tool(
    *, servers: Callable[[], dict[str, int]],
    candidates: Callable[[str], list[ToolDefinition]],
    limit: Callable[[], int],
    found: Callable[[str, list[str]], Awaitable[None]] | None,
) -> Tool[McpSearchInput]:  # fmt: skip
    """The ``mcp_search`` tool over a Location's MCP tools.

    Args:
        servers: tools per connected server (for the description).
        candidates: the MCP tool definitions the agent of that name may see.
        limit: most tools one answer holds.
        found: records the tools found for a session, durably (``None``: not recorded,
            so they are not offered later). A failure of it fails the call.
    """

    async def handler(query: McpSearchInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        if not query.query.strip():
            raise ToolError("Give some words to search for")
        matches = rank_tools(query.query, candidates(ctx.agent), limit())
        if not matches:
            raise ToolError(f"No MCP tool matches {query.query!r}; try other words")
        if found is not None:
            await found(ctx.session_id, [d.name for d in matches])
        tools: list[dict[str, Any]] = [
            {"name": d.name, "description": d.description, "input_schema": d.input_schema}
            for d in matches
        ]
        text = msgspec.json.encode(tools).decode()
        note = f"{len(tools)} tool(s) found; they can be called from the next step on.\n"
        return ToolOutput(content=[TextPart(text=note + text)], structured={"tools": tools})

    return Tool(
        name=SEARCH_TOOL, description=_description(servers()), input_type=McpSearchInput,
        handler=handler,
    )  # fmt: skip
