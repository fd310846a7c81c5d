"""The gateway as served: the HTTP core (``gateway.http``) with OpenCode's room
(``gateway.opencode``), MCP's (``gateway.mcp``), the plugins' (``gateway.plugins``), the
operator's (``gateway.operator``) and the web app's (``gateway.web``) installed on it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from quart_trio import QuartTrio

from actors import Runtime
from gateway.http import (
    DEFAULT_HEARTBEAT,
    DEFAULT_HOST,
    DEFAULT_KNOWN_SESSIONS,
    DEFAULT_MAX_BODY,
    DEFAULT_PORT,
    DEFAULT_SSE_BUFFER,
    AccessLimits,
    Room,
    Server,
    WebsocketLimits,
    create_core,
    serve_app,
)
from gateway.mcp import mcp_routes
from gateway.opencode import FileLimits, LiveAnswers, OpenCodeGateway, opencode_routes
from gateway.operator import operator_routes
from gateway.plugins import plugin_routes
from gateway.web import web_routes

__all__ = ["create_app", "serve"]


def create_app(
    rt: Runtime, *, password: str | None = None, cors_origins: Sequence[str] | None = None,
    max_body: int = DEFAULT_MAX_BODY, heartbeat: float = DEFAULT_HEARTBEAT,
    sse_buffer: int = DEFAULT_SSE_BUFFER, ws_limits: WebsocketLimits | None = None,
    directory: Path | None = None, file_limits: FileLimits | None = None,
    known_sessions: int = DEFAULT_KNOWN_SESSIONS, live: LiveAnswers | None = None,
    tokens: bool = False, access_limits: AccessLimits | None = None, rooms: Sequence[Room] = (),
) -> QuartTrio:  # fmt: skip
    """Build the app serving *rt*. Nothing runs until Hypercorn serves it (see ``serve``).

    Args:
        password: when set, every route (websockets included) needs HTTP basic auth (or,
            with *tokens*, a bearer token); the password is an admin of every project.
        tokens: accept bearer tokens (``/api/token``, ``kittiwake token``) and refuse
            requests without credentials (docs/security.md).
        access_limits: the bounds of authentication: token re-reads, slowed failures,
            per-token admission rates (``gateway.http.AccessLimits``).
        cors_origins: origins allowed cross-origin (``"*"`` for any); none by default.
        max_body: largest request body in bytes; larger ones are answered 413.
        heartbeat: seconds between ``server.heartbeat`` frames on ``/event``.
        directory: the Location of sessions created without one (default: cwd), and the
            project directory the file routes are confined to.
        file_limits: bounds of the file and project message routes.
        known_sessions: how many session ids seen to exist are remembered, sparing the
            existence check of later requests a store lookup.
        live: the bounds of the assistant messages being written that the V1 message
            routes list (``gateway.opencode.LiveAnswers``; its defaults when not given).
        rooms: more rooms, installed after the built-in ones (``kittiwake serve --slack``
            adds Slack's ``POST /slack/events``).
    """
    gw = OpenCodeGateway(
        rt, password=password, heartbeat=heartbeat, sse_buffer=sse_buffer,
        ws_limits=ws_limits or WebsocketLimits(), directory=directory or Path.cwd(),
        origins=frozenset(cors_origins or ()), max_body=max_body, known_sessions=known_sessions,
        live=live, tokens=tokens, access_limits=access_limits,
    )  # fmt: skip
    built_in = (
        opencode_routes(gw, file_limits or FileLimits()), mcp_routes(gw), plugin_routes(gw),
        operator_routes(gw), web_routes(gw),
    )  # fmt: skip
    return create_core(gw, (*built_in, *rooms))


async def serve(
    rt: Runtime, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
    password: str | None = None, cors_origins: Sequence[str] | None = None,
    max_body: int = DEFAULT_MAX_BODY, graceful_timeout: float = 2.0,
    certfile: str | Path | None = None, keyfile: str | Path | None = None,
    listen_fd: int | None = None,
    task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED, **app_options: Any,
) -> None:  # fmt: skip
    """Serve *rt* over HTTP until cancelled or ``Server.stop()``; use with ``nursery.start``.

    The app is ``create_app``'s (with *password*, *cors_origins*, *max_body* and
    *app_options*), served by ``gateway.http.serve_app``, which says what cancellation,
    a port in use and an unreadable certificate do.
    """
    app = create_app(
        rt, password=password, cors_origins=cors_origins, max_body=max_body, **app_options
    )
    await serve_app(
        app, host, port, graceful_timeout=graceful_timeout, certfile=certfile,
        keyfile=keyfile, listen_fd=listen_fd, task_status=task_status,
    )  # fmt: skip
