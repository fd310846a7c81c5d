"""``GET /lsp``: the language servers of a Location, in OpenCode's ``LSPStatus`` shape."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from quart import Response, request

from gateway.http import JSON, Answer, GatewayError, Named, RouteTable, encode
from gateway.opencode._files import inside

if TYPE_CHECKING:
    from gateway.http import Gateway

__all__ = ["lsp_routes"]

_STATUS: Final = Named(
    "LSPStatus",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "root": {"type": "string"},
            "status": {"type": "string", "enum": ["connected", "error"]},
        },
        "required": ["id", "name", "root", "status"],
        "additionalProperties": False,
    },
    array=True,
)


def lsp_routes(table: RouteTable, gw: Gateway) -> None:
    """Declare ``GET /lsp`` (the Location of ``directory``, else the served one): its
    servers that are connected or failed; ones never started or idled out are absent."""

    @table.get(
        "/lsp", "lsp.status", "Get LSP status", answer=Answer(type=_STATUS),
        query=("directory",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def lsp_status() -> Response:
        root = gw.directory.resolve()
        raw = request.args.get("directory")
        directory = root if raw is None else inside(root, raw)
        if not directory.is_dir():
            raise GatewayError("InvalidRequestError", f"Not a directory: {raw}")
        location = await gw.rt.execution.location(str(directory))
        statuses = location.language_servers.statuses()
        return Response(encode(statuses), status=200, content_type=JSON)
