"""OpenCode's room on the HTTP core: the state its routes keep beside the core's, and the
installer that puts its routes on the core's table."""

from __future__ import annotations

from typing import Any

from quart_trio import QuartTrio

from actors import Runtime
from gateway.http import Gateway, Room, RouteTable
from gateway.opencode._event_stream import v1_stream_routes
from gateway.opencode._lsp import lsp_routes
from gateway.opencode._project import FileLimits, project_routes
from gateway.opencode._revert import revert_routes
from gateway.opencode._session_tools import session_tool_routes
from gateway.opencode._v1 import v1_session_routes
from gateway.opencode._v1_actions import UserShell, v1_action_routes
from gateway.opencode._v1_catalog import v1_catalog_routes
from gateway.opencode._v1_events import StatusBoard
from gateway.opencode._v1_live import LiveAnswers

__all__ = ["OpenCodeGateway", "opencode_routes"]


class OpenCodeGateway(Gateway):
    """The core's ``Gateway`` with what OpenCode's routes keep beside it: the busy sessions
    and their idle waiters, the assistant messages being written (fed by the hub while
    served) and the user shell command running per session.

    Args:
        live: the bounds of the assistant messages being written that the V1 message
            routes list (``LiveAnswers``; its defaults when not given).
        options: the core's (``Gateway``).
    """

    def __init__(self, rt: Runtime, *, live: LiveAnswers | None = None, **options: Any) -> None:
        super().__init__(rt, **options)
        self.board: StatusBoard
        """Busy V1 sessions and their idle waiters (``gateway.opencode._v1_events``)."""
        self.live = live or LiveAnswers()
        """Part numbers and the assistant messages being written (``_v1_live``)."""
        self.shells: dict[str, UserShell] = {}
        """The user shell command running per session (``POST /session/{id}/shell``)."""
        self.observers.append(self.live.feed)


def opencode_routes(gw: OpenCodeGateway, limits: FileLimits) -> Room:
    """OpenCode's room: its project, file, session, event, revert, todo, question, LSP,
    config and catalog routes, bounded by *limits*."""

    def install(table: RouteTable, app: QuartTrio) -> None:
        rt = gw.rt

        async def idle(session_id: str) -> None:
            """No drain runs and no user shell command (``POST .../shell``) either."""
            while True:
                await rt.sessions.wait_idle(session_id)
                shell = gw.shells.get(session_id)
                if shell is None:
                    gw.live.idle(session_id)
                    return
                await shell.ended.wait()

        gw.board = StatusBoard(idle, lambda: app.nursery)
        v1_stream_routes(table, app, gw)
        project_routes(table, gw, limits)
        session_tool_routes(table, gw, max_messages=limits.max_messages)
        lsp_routes(table, gw)
        v1_session_routes(
            table, gw, max_sessions=limits.max_sessions, max_messages=limits.max_messages
        )
        revert_routes(table, gw)
        v1_catalog_routes(table, gw, max_walk=limits.max_walk)
        v1_action_routes(table, gw, max_messages=limits.max_messages)

    return install
