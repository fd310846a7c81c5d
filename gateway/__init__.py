"""Kittiwake's gateway: OpenCode's V2 HTTP API, SSE, websocket, inspector and CLI.

Its rooms: ``http`` (the core every surface is built on), ``opencode`` (OpenCode's API
beside the V2 core, and its terminal UI's launcher), ``operator`` (inspector and
telemetry routes), ``cli`` (the ``kittiwake`` command) and ``cluster`` (``serve
--workers``); ``create_app`` and ``serve`` put the core and its rooms together.

The names below load on first use (PEP 562), so ``kittiwake`` commands that only talk to
a server (``--attach``) never import the web framework.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway._collector import settle_collector as settle_collector
    from gateway._gateway import create_app as create_app
    from gateway._gateway import serve as serve
    from gateway.http import AccessLimits as AccessLimits
    from gateway.http import Gateway as Gateway
    from gateway.http import Server as Server
    from gateway.http import WebsocketLimits as WebsocketLimits

__all__ = [
    "AccessLimits",
    "Gateway",
    "Server",
    "WebsocketLimits",
    "create_app",
    "serve",
    "settle_collector",
]

_HOMES = {
    "AccessLimits": "gateway.http",
    "Gateway": "gateway.http",
    "create_app": "gateway._gateway",
    "Server": "gateway.http",
    "serve": "gateway._gateway",
    "settle_collector": "gateway._collector",
    "WebsocketLimits": "gateway.http",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'gateway' has no attribute {name!r}")
    return getattr(import_module(home), name)
