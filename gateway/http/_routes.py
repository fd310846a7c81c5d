"""The route table: one declaration per route registers it on Quart and describes it in /doc.

Each room of the gateway declares its routes on a ``RouteTable`` (method, OpenAPI path,
operation id, summary, body type, answer, error tags, handler). ``register`` adds them to
the Quart app, decoding each request body once to the entry's body type (``Route.decode``)
and handing the handler the typed value; ``gateway.http._openapi.openapi_document`` generates the OpenAPI document from the
same entries. A route exists in both places or in neither; Quart is the one router.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal, TypeVar, cast

import msgspec
from quart import request
from quart_trio import QuartTrio

from gateway.http._wire import decode_body

__all__ = [
    "HTML",
    "JSON",
    "NO_CONTENT",
    "SSE",
    "Answer",
    "Named",
    "Route",
    "RouteTable",
    "quart_path",
    "register",
]

JSON: Final = "application/json"
Method = Literal["GET", "POST", "PATCH", "DELETE", "WEBSOCKET"]
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
    the ones its path and body imply. With a ``body`` type the handler never sees the raw
    bytes: the table decodes them once (``decode``) and passes the typed value as the
    handler's first argument; ``empty_ok`` reads an empty body as ``{}``. A ``named_errors``
    route answers its ``errors`` (those only) in OpenCode's V1 shape ``{"name", "data":
    {"message"}}`` (``GatewayError(named=True)``).
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
    empty_ok: bool = False
    named_errors: bool = False
    public: bool = False
    """Answered without the password (the reads under a shared session's link)."""

    def decode(self, data: bytes) -> Any:
        """The request body as the route's ``body`` type (None when it declares none).

        Raises ``GatewayError`` (400 ``InvalidRequestError``) for malformed JSON or a body
        that does not match the type.
        """
        if self.body is None:
            return None
        return decode_body(data, self.body, empty_ok=self.empty_ok)


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
            query: tuple[str, ...] = (), empty_ok: bool = False, named_errors: bool = False,
            public: bool = False) -> Callable[[F], F]:  # fmt: skip
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
                    empty_ok=empty_ok,
                    named_errors=named_errors,
                    public=public,
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


async def _request_body() -> bytes:
    data = await request.get_data(as_text=False)
    return data if isinstance(data, bytes) else data.encode()


def _typed_view(route: Route) -> Callable[..., Awaitable[Any]]:
    async def view(**params: str) -> Any:
        return await route.handler(route.decode(await _request_body()), **params)

    return view


def register(app: QuartTrio, routes: list[Route]) -> None:
    """Add every route of *routes* to *app* (the operation id is the endpoint name).

    A route with a ``body`` type is registered behind a view that decodes the body (400
    on bad input, before the handler runs) and passes the typed value to its handler.
    """
    for route in routes:
        rule = quart_path(route.path)
        if route.method == "WEBSOCKET":
            app.add_url_rule(
                rule, route.operation_id, route.handler, methods=["GET"], websocket=True
            )
            continue
        if route.body is not None:
            view = _typed_view(route)
        else:
            view = route.handler
        app.add_url_rule(rule, route.operation_id, view, methods=[route.method])
