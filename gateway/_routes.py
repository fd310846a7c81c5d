"""The route table: one declaration per route registers it on Quart and describes it in /doc.

Each room of the gateway declares its routes on a ``RouteTable`` (method, OpenAPI path,
operation id, summary, body type, answer, error tags, handler). ``register`` adds them to
the Quart app; ``gateway._openapi.openapi_document`` generates the OpenAPI document from the
same entries; ``gateway._fast.FastPath`` answers the entries marked ``hot`` in front of
Quart with the same handler. A route exists in all three places or in none.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal, TypeVar, cast

import msgspec
from quart import Response, request
from quart_trio import QuartTrio

__all__ = [
    "HTML",
    "JSON",
    "NO_CONTENT",
    "SSE",
    "Answer",
    "HotHandler",
    "Named",
    "Route",
    "RouteTable",
    "quart_path",
    "register",
]

JSON: Final = "application/json"
Method = Literal["GET", "POST", "PATCH", "DELETE", "WEBSOCKET"]
# A hot route's handler: the path parameters (Quart's names) and the raw body in, the
# status and JSON body (empty for none) out. Quart and the fast path both call it.
HotHandler = Callable[[Mapping[str, str], bytes], Awaitable[tuple[int, bytes]]]
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class Named(msgspec.Struct, frozen=True):
    """A schema written out by hand under a component *name* (shapes taken from OpenCode's
    reference document that no type of ours describes)."""

    name: str
    schema: dict[str, Any]
    array: bool = False
    """Whether the answer is an array of this shape (the component is the shape itself)."""


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """What a route answers on success.

    ``type`` is a msgspec-describable type (a Struct, ``list[...]``, ``dict[str, Any]``,
    ``bool``) or a ``Named`` schema; None documents the status without a body schema.
    ``envelope`` wraps it as ``{"data": ...}`` or a cursor page ``{"data": [...], "cursor"}``.
    """

    status: int = 200
    type: Any = None
    envelope: Literal["data", "page"] | None = None
    media: str | None = JSON
    description: str = "OK"


NO_CONTENT: Final = Answer(status=204, media=None, description="No Content")
SSE: Final = Answer(type=str, media="text/event-stream", description="SSE")
HTML: Final = Answer(type=str, media="text/html", description="HTML page")


class Route(msgspec.Struct, frozen=True, kw_only=True):
    """One route: registered on Quart by ``register``, documented by ``openapi_document``.

    ``path`` is the OpenAPI template (``/api/session/{sessionID}``); the handler receives
    its parameters under Quart's names (``session_id``, see ``quart_path``). ``query``
    names the documented query parameters; ``errors`` the error tags it answers besides
    the ones its path and body imply. A ``hot`` route's handler is a ``HotHandler``; one
    that never ``waits`` (answers without awaiting anything that blocks) is run by the
    fast path without watching for the client's disconnect.
    """

    method: Method
    path: str
    operation_id: str
    summary: str
    handler: Callable[..., Awaitable[Any]]
    body: Any = None
    answer: Answer | None = None
    errors: tuple[str, ...] = ()
    query: tuple[str, ...] = ()
    hot: bool = False
    waits: bool = True


_PARAM: Final = re.compile(r"\{(\w+)\}")


def _param_name(name: str) -> str:
    return name[:-2] + "_id" if name.endswith("ID") else name


def quart_path(path: str) -> str:
    """The Quart rule of an OpenAPI path: ``/a/{sessionID}`` -> ``/a/<session_id>``."""
    return _PARAM.sub(lambda m: f"<{_param_name(m[1])}>", path)


class RouteTable:
    """The routes of one room, declared with decorators that leave the handler unchanged."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(self, method: Method | str, path: str, operation_id: str, summary: str, *,
            body: Any = None, answer: Answer | None = None, errors: tuple[str, ...] = (),
            query: tuple[str, ...] = (), hot: bool = False,
            waits: bool = True) -> Callable[[F], F]:  # fmt: skip
        """Declare a route whose handler is the decorated function."""

        def declare(handler: F) -> F:
            self.routes.append(
                Route(
                    method=cast(Method, method.upper()),
                    path=path,
                    operation_id=operation_id,
                    summary=summary,
                    handler=handler,
                    body=body,
                    answer=answer,
                    errors=errors,
                    query=query,
                    hot=hot,
                    waits=waits,
                )  # fmt: skip
            )
            return handler

        return declare

    def get(self, path: str, operation_id: str, summary: str, **kw: Any) -> Callable[[F], F]:
        return self.add("GET", path, operation_id, summary, **kw)

    def post(self, path: str, operation_id: str, summary: str, **kw: Any) -> Callable[[F], F]:
        return self.add("POST", path, operation_id, summary, **kw)

    def patch(self, path: str, operation_id: str, summary: str, **kw: Any) -> Callable[[F], F]:
        return self.add("PATCH", path, operation_id, summary, **kw)

    def delete(self, path: str, operation_id: str, summary: str, **kw: Any) -> Callable[[F], F]:
        return self.add("DELETE", path, operation_id, summary, **kw)

    def websocket(self, path: str, operation_id: str, summary: str) -> Callable[[F], F]:
        return self.add("WEBSOCKET", path, operation_id, summary, answer=_SWITCHING)


_SWITCHING: Final = Answer(status=101, media=None, description="Switching Protocols")


def _hot_view(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Response]]:
    async def view(**params: str) -> Response:
        data = await request.get_data(as_text=False)
        status, payload = await handler(params, data if isinstance(data, bytes) else data.encode())
        if payload:
            return Response(payload, status=status, content_type=JSON)
        return Response(b"", status=status)

    return view


def register(app: QuartTrio, routes: list[Route]) -> None:
    """Add every route of *routes* to *app* (the operation id is the endpoint name)."""
    for route in routes:
        rule = quart_path(route.path)
        if route.method == "WEBSOCKET":
            app.add_url_rule(
                rule, route.operation_id, route.handler, methods=["GET"], websocket=True
            )
            continue
        view = _hot_view(route.handler) if route.hot else route.handler
        app.add_url_rule(rule, route.operation_id, view, methods=[route.method])
