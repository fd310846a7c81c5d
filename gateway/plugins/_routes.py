"""``GET /plugin``: the plugins of the Location a request names (``?directory=``), once
their loading ended, in load order; and their providers' login routes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from quart import Response
from quart_trio import QuartTrio

from gateway.http import JSON, Answer, Room, RouteTable, encode, request_directory
from gateway.plugins._auth import declare_auth
from runtime.plugins import PluginStatus

if TYPE_CHECKING:
    from gateway.http import Gateway

__all__ = ["plugin_routes"]


def plugin_routes(gw: Gateway) -> Room:
    """The plugins' room: installs its routes on the core's table (``GET /plugin``, and
    the provider login routes of ``gateway.plugins._auth``)."""

    def install(table: RouteTable, app: QuartTrio) -> None:
        @table.get(
            "/plugin", "plugin.list", "The Location's plugins in load order, once their loading "
            "ended: where each came from, its state (ready or failed), whether it is "
            "required, the hooks it implements, and its last error",
            answer=Answer(type=list[PluginStatus]), query=("directory",),
            errors=("InvalidRequestError",),
        )  # fmt: skip
        async def plugins() -> Response:
            directory = str(request_directory(gw))
            location = await gw.rt.execution.current_location(directory)
            await location.plugins.wait_settled()
            return Response(encode(location.plugins.statuses()), status=200, content_type=JSON)

        declare_auth(table, gw)

    return install
