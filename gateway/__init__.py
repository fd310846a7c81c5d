"""Kittiwake's gateway: OpenCode's V2 HTTP API, SSE, websocket, inspector and CLI.

The names below load on first use (PEP 562), so ``kittiwake`` commands that only talk to
a server (``--attach``) never import the web framework.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway._app import Gateway as Gateway
    from gateway._app import create_app as create_app
    from gateway._serve import Server as Server
    from gateway._serve import serve as serve
    from gateway._ws import WebsocketLimits as WebsocketLimits

__all__ = ["Gateway", "Server", "WebsocketLimits", "create_app", "serve"]

_HOMES = {
    "Gateway": "gateway._app",
    "create_app": "gateway._app",
    "Server": "gateway._serve",
    "serve": "gateway._serve",
    "WebsocketLimits": "gateway._ws",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'gateway' has no attribute {name!r}")
    return getattr(import_module(home), name)
