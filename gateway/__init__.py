"""Kittiwake's gateway: OpenCode's V2 HTTP API, SSE, websocket, inspector and CLI."""

from gateway._app import Gateway as Gateway
from gateway._app import create_app as create_app
from gateway._serve import Server as Server
from gateway._serve import serve as serve
from gateway._ws import WebsocketLimits as WebsocketLimits

__all__ = ["Gateway", "Server", "WebsocketLimits", "create_app", "serve"]
