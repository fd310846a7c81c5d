"""OpenCode's MCP routes, answering in its shapes (``MCPStatus``, ``McpResource``,
``McpServerNotFoundError``) for the Location a request names (``?directory=``).

The sign-in routes (``/mcp/{name}/auth...``) are ``_auth.py``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec
from quart import Response
from quart_trio import QuartTrio

from gateway.http import (
    JSON,
    Answer,
    GatewayError,
    Named,
    Room,
    RouteTable,
    encode,
    request_directory,
)
from gateway.mcp._auth import declare_auth
from runtime.config import McpServerConfig
from runtime.mcp import McpServerNotFound, McpServers, spec_of

if TYPE_CHECKING:
    from gateway.http import Gateway

__all__ = ["McpAddBody", "mcp_routes"]

_STATUS: Final = {
    "anyOf": [
        {"type": "object", "properties": {"status": {"type": "string", "enum": [s]}},
         "required": ["status"]}
        for s in ("connected", "disabled", "needs_auth")
    ] + [
        {"type": "object", "properties": {"status": {"type": "string", "enum": [s]},
                                          "error": {"type": "string"}},
         "required": ["status", "error"]}
        for s in ("failed", "needs_client_registration")
    ]
}  # fmt: skip
STATUSES: Final = Named("MCPStatusMap", {"type": "object", "additionalProperties": _STATUS})
_RESOURCE: Final = {
    "type": "object",
    "properties": {
        "name": {"type": "string"}, "uri": {"type": "string"},
        "description": {"type": "string"}, "mimeType": {"type": "string"},
        "client": {"type": "string"},
    },
    "required": ["name", "uri", "client"],
}  # fmt: skip
RESOURCES: Final = Named("McpResourceMap", {"type": "object", "additionalProperties": _RESOURCE})
_NOT_FOUND: Final = ("McpServerNotFoundError",)


class McpAddBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``POST /mcp``: a server to add to the Location while it is open."""

    name: str
    config: McpServerConfig


def _json(body: Any) -> Response:
    return Response(encode(body), status=200, content_type=JSON)


def mcp_routes(gw: Gateway) -> Room:
    """The MCP room: installs its routes on the core's table."""

    def install(table: RouteTable, app: QuartTrio) -> None:
        _declare(table, gw)

    return install


def _declare(table: RouteTable, gw: Gateway) -> None:
    async def servers() -> tuple[str, McpServers]:
        directory = str(request_directory(gw))
        return directory, (await gw.rt.execution.current_location(directory)).mcp

    declare_auth(table, gw, servers, _STATUS)

    def not_found(exc: McpServerNotFound) -> GatewayError:
        return GatewayError(
            "McpServerNotFoundError", f"MCP server not found: {exc.name}", name=exc.name
        )

    @table.get(
        "/mcp", "mcp.status", "The status of each MCP server of the Location (once none is "
        "still connecting)", answer=Answer(type=STATUSES), query=("directory",),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def status() -> Response:
        _, mcp = await servers()
        await mcp.settled()
        return _json(mcp.statuses())

    @table.post(
        "/mcp", "mcp.add", "Add an MCP server to the Location while it is open; the whole "
        "status map once it connected or failed", body=McpAddBody,
        answer=Answer(type=STATUSES), query=("directory",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def add(body: McpAddBody) -> Response:
        directory, mcp = await servers()
        spec = spec_of(body.name, body.config, directory)
        if body.config.type is None or spec.error is not None:
            message = spec.error or f"mcp.{body.name}: needs a type, local or remote"
            raise GatewayError("InvalidRequestError", message)
        return _json(await mcp.add(spec))

    @table.post(
        "/mcp/{name}/connect", "mcp.connect", "Connect an MCP server (enabling it)",
        answer=Answer(type=bool), query=("directory",), errors=_NOT_FOUND,
    )  # fmt: skip
    async def connect(name: str) -> Response:
        _, mcp = await servers()
        try:
            await mcp.connect(name)
        except McpServerNotFound as exc:
            raise not_found(exc) from None
        return _json(True)

    @table.post(
        "/mcp/{name}/disconnect", "mcp.disconnect", "Disconnect an MCP server (disabling it)",
        answer=Answer(type=bool), query=("directory",), errors=_NOT_FOUND,
    )  # fmt: skip
    async def disconnect(name: str) -> Response:
        _, mcp = await servers()
        try:
            await mcp.disconnect(name)
        except McpServerNotFound as exc:
            raise not_found(exc) from None
        return _json(True)

    @table.get(
        "/experimental/resource", "experimental.resource.list",
        "The resources of the Location's connected MCP servers, by <server>:<uri>",
        answer=Answer(type=RESOURCES), query=("directory",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def resources() -> Response:
        _, mcp = await servers()
        await mcp.settled()
        return _json(mcp.resources())
