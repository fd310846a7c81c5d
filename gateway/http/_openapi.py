"""``GET /doc``: the OpenAPI 3.1 document, generated from the route table.

Each operation lists its error tags under ``x-errors`` (the responses group them by status);
``info.version`` is the server's version. The Python SDK is generated from this document
(``gateway.sdk``).

Every path, operation, parameter, request body and answer comes from a ``Route``
(``gateway.http._routes``); schemas come from ``msgspec.json.schema_components`` of the body
and answer types, plus the ``Named`` shapes taken from OpenCode's reference document.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

import msgspec

from gateway.http._routes import Answer, Named, Route
from gateway.http._wire import STATUS_BY_TAG

__all__ = ["ErrorBody", "NamedError", "NamedErrorData", "openapi_document", "server_version"]

_REF: Final = "#/components/schemas/{name}"
_PARAM_START: Final = "{"


class ErrorBody(msgspec.Struct, frozen=True, rename={"tag": "_tag"}):
    """Every error answer: ``{"_tag", "message", ...}``."""

    tag: str
    message: str


class NamedErrorData(msgspec.Struct, frozen=True):
    message: str


class NamedError(msgspec.Struct, frozen=True):
    """An error answer of a ``named_errors`` route: OpenCode's V1 ``{"name", "data"}``."""

    name: str
    data: NamedErrorData


_ERROR: Final = {"application/json": {"schema": {"$ref": _REF.format(name="ErrorBody")}}}
_NAMED_ERROR: Final = {"application/json": {"schema": {"$ref": _REF.format(name="NamedError")}}}
_CURSOR: Final = {
    "type": "object",
    "properties": {"previous": {"type": "string"}, "next": {"type": "string"}},
}


def _types(routes: Iterable[Route]) -> list[Any]:
    seen: dict[Any, None] = {ErrorBody: None, NamedError: None}
    for route in routes:
        for kind in (route.body, route.answer.type if route.answer else None):
            if kind is not None and not isinstance(kind, Named):
                seen.setdefault(kind, None)
    return list(seen)


def _errors(route: Route) -> list[str]:
    """The route's error tags: those its path and body imply, then its own (its own only
    for a ``named_errors`` route)."""
    if route.named_errors:
        return list(route.errors)
    tags: list[str] = []
    if "{sessionID}" in route.path:
        tags.append("SessionNotFoundError")
    if route.body is not None:
        tags += ["InvalidRequestError", "PayloadTooLargeError"]
    return tags + [t for t in route.errors if t not in tags]


def _answer(answer: Answer, schema_of: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"description": answer.description}
    if answer.media is None or answer.type is None:
        return out
    schema = schema_of(answer.type)
    if answer.envelope == "data":
        schema = {"type": "object", "properties": {"data": schema}, "required": ["data"]}
    elif answer.envelope == "page":
        schema = {
            "type": "object",
            "properties": {"data": {"type": "array", "items": schema}, "cursor": _CURSOR},
            "required": ["data", "cursor"],
        }
    out["content"] = {answer.media: {"schema": schema}}
    return out


def _operation(route: Route, schema_of: Any) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    if route.answer is not None:
        responses[str(route.answer.status)] = _answer(route.answer, schema_of)
    by_status: dict[int, list[str]] = {}
    for tag in _errors(route):
        by_status.setdefault(STATUS_BY_TAG.get(tag, 500), []).append(tag)
    error = _NAMED_ERROR if route.named_errors else _ERROR
    for status, tags in sorted(by_status.items()):
        responses[str(status)] = {"description": ", ".join(tags), "content": error}
    responses["default"] = {"description": "Error", "content": error}
    op: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "responses": responses,
        "x-errors": _errors(route),
    }
    parameters = [
        {"name": part[1:-1], "in": "path", "required": True, "schema": {"type": "string"}}
        for part in route.path.split("/")
        if part.startswith(_PARAM_START)
    ] + [
        {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
        for name in route.query
    ]
    if parameters:
        op["parameters"] = parameters
    if route.body is not None:
        content = {"application/json": {"schema": schema_of(route.body)}}
        op["requestBody"] = {"required": True, "content": content}
    return op


def server_version() -> str:
    """The installed ``kittiwake`` distribution's version (the SDK generated from this
    document carries it); ``0.0.0`` when no distribution is installed."""
    try:
        return version("kittiwake")
    except PackageNotFoundError:
        return "0.0.0"


def openapi_document(routes: Iterable[Route]) -> dict[str, Any]:
    """The document describing *routes* (websocket routes as their ``GET`` handshake)."""
    routes = list(routes)
    types = _types(routes)
    refs, components = msgspec.json.schema_components(types, ref_template=_REF)
    by_type = dict(zip(types, refs, strict=True))

    def schema_of(kind: Any) -> dict[str, Any]:
        if isinstance(kind, Named):
            components[kind.name] = kind.schema
            ref = {"$ref": _REF.format(name=kind.name)}
            return {"type": "array", "items": ref} if kind.array else ref
        return by_type[kind]

    paths: dict[str, Any] = {}
    for route in routes:
        method = "get" if route.method == "WEBSOCKET" else route.method.lower()
        paths.setdefault(route.path, {})[method] = _operation(route, schema_of)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Kittiwake", "version": server_version()},
        "paths": paths,
        "components": {"schemas": components},
    }
