"""What an MCP client needs of the runtime around it: durable records and questions of the
session a server's request belongs to."""

from __future__ import annotations

from typing import Protocol

__all__ = ["McpHost"]


class McpHost(Protocol):
    """The runtime's side of a Location's MCP servers (implemented over durable storage)."""

    async def tools_found(self, session_id: str, tools: list[str]) -> None:
        """Record durably that ``mcp_search`` found *tools* (ids) for the session: they are
        offered to its model from then on. Raises when the record could not be written."""
        ...
