"""The fast path: the hot routes answered in front of Quart, everything else passed through.

``GET /api/health``, ``POST /api/session/{id}/prompt`` and ``POST /api/session/{id}/wait``
are what a client runs per prompt; Quart's request and response machinery (request
context, hooks, two tasks per request) costs more than the routes themselves. This ASGI
app answers them with the same functions and error bodies Quart's routes use
(``gateway._app``), and hands every other request, each websocket and the lifespan to
Quart. A request it cannot answer exactly as Quart would (wrong or missing password, a
body over ``max_body`` or without a ``content-length``) also goes to Quart untouched:
nothing of it has been read by then.
"""

from __future__ import annotations

import logging
from typing import Final, cast

import trio
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGISendCallable,
    HTTPRequestEvent,
    HTTPResponseStartEvent,
    HTTPScope,
    Scope,
)
from werkzeug.exceptions import HTTPException, InternalServerError

from gateway._app import (
    HEALTHY,
    JSON,
    Gateway,
    admit_prompt,
    authorized,
    cors_headers,
    error_answer,
    wait_idle,
)
from gateway._wire import GatewayError
from runtime import KittiwakeError

__all__ = ["FastPath"]

_log = logging.getLogger("kittiwake.gateway")

_JSON_TYPE: Final = (b"content-type", JSON.encode())


class _Disconnected(Exception):
    pass


class FastPath:
    """An ASGI app answering the hot routes itself and passing the rest to *app*.

    Args:
        app: the Quart app (``create_app``) that answers everything else.
        gw: its ``Gateway`` (runtime, password, CORS origins, ``max_body``).
    """

    def __init__(self, app: ASGIFramework, gw: Gateway) -> None:
        self._app = app
        self._gw = gw

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        """Answer one ASGI connection scope (Hypercorn calls this per request).

        A client that disconnects before the answer cancels the route and gets nothing;
        failures are answered as Quart's error handlers answer them.
        """
        route = _route(scope) if scope["type"] == "http" else None
        if route is None:
            return await self._app(scope, receive, send)
        scope = cast(HTTPScope, scope)
        origin: str | None = None
        auth: str | None = None
        length = 0
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = int(value) if value.isdigit() else -1
            elif name == b"transfer-encoding":
                length = -1
            elif name == b"authorization":
                auth = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
        gw = self._gw
        if not 0 <= length <= gw.max_body or gw.password and not authorized(auth, gw.password):
            return await self._app(scope, receive, send)
        # Read every body before answering, as Quart's routes do (see gateway/_app.py).
        try:
            body = await _read_body(receive) if length or route[0] != "health" else b""
        except _Disconnected:
            return
        if route[0] == "health":
            status, payload = 200, HEALTHY
        else:
            status, payload = await self._answer(route, body, receive)
            if status == 0:
                return
        headers = [(k.encode(), v.encode()) for k, v in cors_headers(origin, gw.origins)]
        headers.append((b"content-length", str(len(payload)).encode()))
        if payload:
            headers.append(_JSON_TYPE)
        start: HTTPResponseStartEvent = {
            "type": "http.response.start", "status": status, "headers": headers, "trailers": False
        }  # fmt: skip
        await send(start)
        await send({"type": "http.response.body", "body": payload, "more_body": False})

    async def _answer(
        self, route: tuple[str, str], body: bytes, receive: ASGIReceiveCallable
    ) -> tuple[int, bytes]:
        """Run the route until it answers; ``(0, b"")`` when the client left first.

        The route is cancelled when the client disconnects, as Quart does. Errors are
        answered with the bodies Quart's error handlers give; anything unexpected is
        logged and answered 500.
        """
        kind, session_id = route
        rt = self._gw.rt
        answer: tuple[int, bytes] = (0, b"")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
            try:
                if kind == "prompt":
                    answer = (200, await admit_prompt(rt, session_id, body))
                else:
                    await wait_idle(self._gw, session_id)
                    answer = (204, b"")
            except (GatewayError, KittiwakeError, HTTPException) as exc:
                answer = error_answer(exc)
            except Exception:
                _log.exception("request failed", extra={"route": kind})
                answer = error_answer(InternalServerError())
            nursery.cancel_scope.cancel()
        return answer


def _route(scope: Scope) -> tuple[str, str] | None:
    """``(kind, session id)`` of a hot route, or None for everything Quart answers."""
    http = cast(HTTPScope, scope)
    method, path = http["method"], http["path"]
    if method == "GET":
        return ("health", "") if path == "/api/health" else None
    if method != "POST" or not path.startswith("/api/session/"):
        return None
    parts = path.split("/")
    if len(parts) != 5 or not parts[3] or parts[4] not in ("prompt", "wait"):
        return None
    return parts[4], parts[3]


async def _read_body(receive: ASGIReceiveCallable) -> bytes:
    """The whole request body (its ``content-length`` was checked against ``max_body``).

    Raises ``_Disconnected`` when the client leaves first.
    """
    chunks: list[bytes] = []
    while True:
        event = await receive()
        if event["type"] != "http.request":
            raise _Disconnected
        message = cast(HTTPRequestEvent, event)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks) if len(chunks) != 1 else chunks[0]


async def _cancel_on_disconnect(receive: ASGIReceiveCallable, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
