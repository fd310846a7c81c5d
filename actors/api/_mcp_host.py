"""The runtime's side of the Location's MCP servers (``runtime.mcp.McpHost``): what the
servers' sessions record durably."""

from __future__ import annotations

from collections.abc import Callable

from actors.session import SessionExecution
from actors.store import StorageActor
from runtime import events as ev
from storage import Append, GetSession

__all__ = ["McpSessionHost"]


class McpSessionHost:
    """Records, for every Location's MCP servers, what their sessions keep durably: the
    tools ``mcp_search`` found (``session.mcp.tools.found``)."""

    def __init__(
        self, *, storage: StorageActor, execution: SessionExecution, now_ms: Callable[[], int]
    ) -> None:
        self._storage = storage
        self._x = execution
        self._now = now_ms

    async def tools_found(self, session_id: str, tools: list[str]) -> None:
        """Append ``session.mcp.tools.found`` and hand the session's actor its info with
        them (offered from its next provider turn). Raises StorageError when the write
        failed; cancellation leaves the write to finish or not."""
        event = ev.McpToolsFound(timestamp=self._now(), session_id=session_id, tools=tools)
        await self._storage.write(Append(session_id=session_id, events=[event]))
        info = await self._storage.read(GetSession(session_id=session_id))
        if info is not None:
            self._x.refresh_info(info)
