"""What an MCP client needs of the runtime around it: durable records, questions and
permissions of the session a server's request belongs to, and its model."""

from __future__ import annotations

from typing import Protocol

import msgspec

from runtime import events as ev
from runtime.llm import LLMClient, ModelRef
from runtime.tools import ToolContext

__all__ = ["McpCall", "McpHost"]


class McpCall(msgspec.Struct, frozen=True, kw_only=True):
    """A call of an MCP tool in flight: who made it (``ctx``) and the tool's id."""

    ctx: ToolContext
    tool: str


class McpHost(Protocol):
    """The runtime's side of a Location's MCP servers (implemented over durable storage)."""

    async def tools_found(self, session_id: str, tools: list[str]) -> None:
        """Record durably that ``mcp_search`` found *tools* (ids) for the session: they are
        offered to its model from then on. Raises when the record could not be written."""
        ...

    async def ask(self, call: McpCall, questions: list[ev.QuestionInfo]) -> list[list[str]] | None:
        """Ask the user of *call*'s session *questions*, durably (the question tool's kind,
        tied to the call), and wait for the answers; ``None`` when dismissed.
        Cancellation records them as dismissed (unless the runtime is closing: then they
        stay pending, answerable after a restart) and propagates."""
        ...

    async def sampling_model(self, call: McpCall, server: str) -> tuple[ModelRef, LLMClient]:
        """The model of *call*'s session (and the client it streams from), once the
        permission ``mcp_sampling`` on *server* is granted under the call's agent (asked
        like any tool's). Raises ``ToolError`` when it is denied or rejected."""
        ...
