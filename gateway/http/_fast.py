"""The fast path: the hot routes answered in front of Quart, everything else passed through.

The route table entries marked ``hot`` (``GET /api/health``, ``POST
/api/session/{id}/prompt`` and ``POST /api/session/{id}/wait``: what a client runs per
prompt) are answered here, since Quart's request and response machinery (request context,
hooks, two tasks per request) costs more than the routes themselves. The dispatch is built
from the same ``Route`` entries Quart registers, and calls the same handler, gate
(``Access.admit``, answering its refusals) and error mapping (``error_answer``) Quart's
routes use; every other request, each websocket and the lifespan go to Quart. A request it
cannot answer exactly as Quart would (a body over ``max_body`` or without a
``content-length``, an ``Origin`` when CORS is on, whose headers Quart-CORS adds) also goes
to Quart untouched: nothing of it has been read by then.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
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

from gateway.http._access import Refusal
from gateway.http._app import Gateway
from gateway.http._guards import error_answer
from gateway.http._routes import JSON, Route, quart_path
from gateway.http._wire import GatewayError
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
        self._hot = _hot_routes(gw.routes)

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        """Answer one ASGI connection scope (Hypercorn calls this per request).

        A client that disconnects before the answer cancels the route and gets nothing;
        failures are answered as Quart's error handlers answer them.
        """
        found = _match(self._hot, cast(HTTPScope, scope)) if scope["type"] == "http" else None
        if found is None:
            return await self._app(scope, receive, send)
        scope = cast(HTTPScope, scope)
        cross_origin = False
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
                cross_origin = True
        gw = self._gw
        if not 0 <= length <= gw.max_body or cross_origin and gw.origins:
            return await self._app(scope, receive, send)
        if gw.access.required:
            client = scope.get("client")
            address = client[0] if client else ""
            try:
                admitted = await gw.access.admit(auth, address, scope["method"], scope["path"])
                if isinstance(admitted, Refusal):
                    return await _refuse(send, admitted)
                await gw.scope.check(admitted, scope["path"], found[1])
            except (GatewayError, KittiwakeError) as exc:
                status, payload = error_answer(exc)
                return await _refuse(send, Refusal(status, payload))
        # Read every body before answering, as Quart does (gateway/http/_guards.py).
        try:
            body = await _read_body(receive) if length or found[0].method != "GET" else b""
        except _Disconnected:
            return
        route, params = found
        if route.waits:
            status, payload = await _answer(route, params, body, receive)
        else:
            status, payload = await _answer_at_once(route, params, body)
        if status == 0:
            return
        headers = [(b"content-length", str(len(payload)).encode())]
        if payload:
            headers.append(_JSON_TYPE)
        start: HTTPResponseStartEvent = {
            "type": "http.response.start", "status": status, "headers": headers, "trailers": False
        }  # fmt: skip
        await send(start)
        await send({"type": "http.response.body", "body": payload, "more_body": False})


async def _refuse(send: ASGISendCallable, refusal: Refusal) -> None:
    """Answer a refused request as Quart's guard does (``refusal_response``)."""
    headers = [(b"content-length", str(len(refusal.body)).encode()), _JSON_TYPE]
    headers += [(k.lower().encode(), v.encode()) for k, v in refusal.headers.items()]
    start: HTTPResponseStartEvent = {
        "type": "http.response.start", "status": refusal.status, "headers": headers,
        "trailers": False,
    }  # fmt: skip
    await send(start)
    await send({"type": "http.response.body", "body": refusal.body, "more_body": False})


_HotRoutes = dict[str, list[tuple[re.Pattern[str], Route]]]


def _hot_routes(routes: Sequence[Route]) -> _HotRoutes:
    """The ``hot`` entries of the route table by method, each with the pattern of its path
    (a parameter matches one non-empty segment, as Quart's default converter does)."""
    hot: _HotRoutes = {}
    for route in routes:
        if route.hot:
            pattern = re.sub(r"<(\w+)>", r"(?P<\1>[^/]+)", re.escape(quart_path(route.path)))
            hot.setdefault(route.method, []).append((re.compile(pattern), route))
    return hot


def _match(hot: _HotRoutes, scope: HTTPScope) -> tuple[Route, Mapping[str, str]] | None:
    """The hot route answering *scope* and its path parameters, or None (Quart answers)."""
    for pattern, route in hot.get(scope["method"], ()):
        found = pattern.fullmatch(scope["path"])
        if found is not None:
            return route, found.groupdict()
    return None


async def _answer_at_once(
    route: Route, params: Mapping[str, str], body: bytes
) -> tuple[int, bytes]:
    """Run a route that never waits; errors are answered as in ``_answer``."""
    try:
        return await route.answer_hot(params, body)
    except (GatewayError, KittiwakeError, HTTPException) as exc:
        return error_answer(exc)
    except Exception:
        _log.exception("request failed", extra={"route": route.operation_id})
        return error_answer(InternalServerError())


async def _answer(
    route: Route, params: Mapping[str, str], body: bytes, receive: ASGIReceiveCallable
) -> tuple[int, bytes]:
    """Run the route until it answers; ``(0, b"")`` when the client left first.

    The route is cancelled when the client disconnects, as Quart does. Errors are
    answered with the bodies Quart's error handlers give; anything unexpected is
    logged and answered 500.
    """
    answer: tuple[int, bytes] = (0, b"")
    # The watcher ends inside its own scope, so neither task leaves with ``Cancelled``
    # on the way every answered request takes (trio formats a reason for each one).
    watcher = trio.CancelScope()
    with trio.CancelScope() as route_scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_disconnect, receive, route_scope, watcher)
            try:
                answer = await route.answer_hot(params, body)
            except (GatewayError, KittiwakeError, HTTPException) as exc:
                answer = error_answer(exc)
            except Exception:
                _log.exception("request failed", extra={"route": route.operation_id})
                answer = error_answer(InternalServerError())
            watcher.cancel()
    return answer


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


async def _cancel_on_disconnect(
    receive: ASGIReceiveCallable, route: trio.CancelScope, watcher: trio.CancelScope
) -> None:
    """Cancel *route* when the client disconnects; end quietly when *watcher* is cancelled."""
    with watcher:
        while (await receive())["type"] != "http.disconnect":
            pass
        route.cancel()
