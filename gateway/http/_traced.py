"""Request spans: each HTTP request and websocket of the app served as a span (its method and
route template, status and duration), built only when spans are recorded."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, cast

from hypercorn.typing import ASGIFramework, ASGIReceiveCallable, ASGISendCallable, Scope
from opentelemetry.trace import Status, StatusCode

from gateway.http._routes import Route, quart_path
from runtime.telemetry import span

__all__ = ["Traced"]


class Traced:
    """An ASGI app that runs each HTTP request and websocket of *app* in a span named by its
    method and route template, with its status; only built when spans are recorded."""

    def __init__(self, app: ASGIFramework, routes: Sequence[Route]) -> None:
        self._app = app
        self._routes = [
            (route.method, re.compile(_pattern(route.path)), route.path) for route in routes
        ]

    def _route(self, method: str, path: str) -> str:
        for wanted, pattern, template in self._routes:
            if wanted == method and pattern.fullmatch(path):
                return template
        return path if path in ("/", "/inspector") else "(unmatched)"

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            return await self._app(scope, receive, send)
        method = "WEBSOCKET" if kind == "websocket" else cast(str, scope.get("method", "GET"))
        status: list[int] = []

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "websocket.accept":
                status.append(101)
            await send(message)

        with span("websocket" if kind == "websocket" else method) as s:
            if s.is_recording():  # the route is matched only for a recorded request
                route = self._route(method, cast(str, scope.get("path", "")))
                s.set_attributes({"http.request.method": method, "http.route": route})
                if kind != "websocket":
                    s.update_name(f"{method} {route}")
            try:
                await self._app(scope, receive, sending)
            finally:
                if status and s.is_recording():
                    s.set_attribute("http.response.status_code", status[0])
                    if status[0] >= 500:
                        s.set_status(Status(StatusCode.ERROR, f"HTTP {status[0]}"))


def _pattern(path: str) -> str:
    return re.sub(r"<(\w+)>", r"[^/]+", re.escape(quart_path(path)))
