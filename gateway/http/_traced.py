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
        # Per method, one pattern of the routes' as alternatives in table order, each a
        # named group: one match in C names the first route that matches (every request
        # is traced, the loop over a hundred patterns cost up to 30 us).
        by_method: dict[str, list[str]] = {}
        for route in routes:
            by_method.setdefault(route.method, []).append(route.path)
        self._routes = {
            method: (
                re.compile("|".join(f"(?P<r{i}>{_pattern(p)})" for i, p in enumerate(paths))),
                paths,
            )
            for method, paths in by_method.items()
        }

    def _route(self, method: str, path: str) -> str:
        routes = self._routes.get(method)
        found = routes[0].fullmatch(path) if routes is not None else None
        if routes is not None and found is not None and found.lastgroup is not None:
            return routes[1][int(found.lastgroup[1:])]
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
