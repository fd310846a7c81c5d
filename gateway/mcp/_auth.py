"""OpenCode's MCP sign-in routes: ``POST /mcp/{name}/auth`` (start: the authorization URL),
``POST /mcp/{name}/auth/callback`` (the code, and its state), ``POST
/mcp/{name}/auth/authenticate`` (start, open the browser, wait) and ``DELETE
/mcp/{name}/auth`` (sign out), over the runtime's ``McpOAuth``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs, urlsplit

import msgspec
import trio
from quart import Response

from gateway.http import JSON, Answer, GatewayError, Named, RouteTable, encode
from runtime.mcp import (
    McpAuthRequired,
    McpOAuth,
    McpServer,
    McpServerNotFound,
    McpServers,
    McpSignIn,
    McpSignInError,
)

if TYPE_CHECKING:
    from gateway.http import Gateway

__all__ = ["McpCallbackBody", "declare_auth"]

_START: Final = Named(
    "McpAuthStart",
    {
        "type": "object",
        "properties": {"authorizationUrl": {"type": "string"}, "oauthState": {"type": "string"}},
        "required": ["authorizationUrl", "oauthState"],
    },
)
_REMOVED: Final = Named(
    "McpAuthRemoved",
    {"type": "object", "properties": {"success": {"type": "boolean", "enum": [True]}},
     "required": ["success"]},
)  # fmt: skip
_ERRORS: Final = ("InvalidRequestError", "McpServerNotFoundError")


class McpCallbackBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``POST /mcp/{name}/auth/callback``: the authorization code and the ``state`` the
    browser came back with. OpenCode sends ``code`` alone; then ``code`` must be the whole
    URL the browser was sent back to (its query holds both)."""

    code: str
    state: str | None = None


def _code_and_state(body: McpCallbackBody) -> tuple[str, str]:
    if body.state is not None:
        return body.code, body.state
    query = parse_qs(urlsplit(body.code).query)
    code, state = (query.get("code") or [""])[0], (query.get("state") or [""])[0]
    if not code or not state:
        raise GatewayError(
            "InvalidRequestError", "state is required: send {code, state}, or as code the "
            "whole URL the browser was sent back to",
        )  # fmt: skip
    return code, state


def _json(body: Any) -> Response:
    return Response(encode(body), status=200, content_type=JSON)


def declare_auth(
    table: RouteTable, gw: Gateway, servers: Callable[[], Awaitable[tuple[str, McpServers]]],
    status: dict[str, Any],
) -> None:  # fmt: skip
    """Declare the sign-in routes on *table*; *servers* finds the request's Location's,
    *status* is the schema of OpenCode's ``MCPStatus``."""
    one_status = Named("MCPStatus", status)

    def oauth() -> McpOAuth:
        return gw.rt.execution.mcp_oauth

    async def named(name: str) -> tuple[McpServers, McpServer]:
        _, mcp = await servers()
        with trio.move_on_after(mcp.limits.connect_timeout):
            await mcp.started.wait()  # a Location just opened starts its servers next
        server = mcp.servers.get(name)
        if server is None:
            exc = McpServerNotFound(name)
            raise GatewayError("McpServerNotFoundError", str(exc), name=name)
        return mcp, server

    async def start(mcp: McpServers, server: McpServer) -> McpSignIn | None:
        spec = server.spec
        if spec.type != "remote" or not spec.oauth:
            raise GatewayError(
                "InvalidRequestError", f"MCP server {spec.name} does not support OAuth"
            )
        try:
            return await oauth().start(spec, on_done=lambda: mcp.reconnect(spec.name))
        except McpAuthRequired as exc:
            raise GatewayError("InvalidRequestError", str(exc)) from None
        except McpSignInError as exc:
            raise GatewayError("InvalidRequestError", str(exc)) from None
        except Exception as exc:
            raise GatewayError("InvalidRequestError", _unreachable(spec.url, exc)) from None

    async def status_of(mcp: McpServers, name: str) -> Response:
        await mcp.settled()
        return _json(mcp.statuses().get(name, {"status": "disabled"}))

    @table.post(
        "/mcp/{name}/auth", "mcp.auth.start", "Start signing in to a remote MCP server: the "
        "authorization URL to open (empty when the server needs no sign-in)",
        answer=Answer(type=_START), query=("directory",), errors=_ERRORS,
    )  # fmt: skip
    async def auth_start(name: str) -> Response:
        mcp, server = await named(name)
        flow = await start(mcp, server)
        if flow is None:
            mcp.reconnect(name)
            return _json({"authorizationUrl": "", "oauthState": ""})
        return _json({"authorizationUrl": flow.authorization_url, "oauthState": flow.state})

    @table.post(
        "/mcp/{name}/auth/callback", "mcp.auth.callback", "Finish signing in with the code "
        "the browser was given (and its state); the server's status once it connected",
        body=McpCallbackBody, answer=Answer(type=one_status), query=("directory",), errors=_ERRORS,
    )  # fmt: skip
    async def auth_callback(body: McpCallbackBody, name: str) -> Response:
        mcp, _ = await named(name)
        code, state = _code_and_state(body)
        try:
            await oauth().finish(name, code, state)
        except McpSignInError as exc:
            raise GatewayError("InvalidRequestError", str(exc)) from None
        except Exception as exc:
            raise GatewayError(
                "InvalidRequestError", _unreachable("the token endpoint", exc)
            ) from None
        return await status_of(mcp, name)

    @table.post(
        "/mcp/{name}/auth/authenticate", "mcp.auth.authenticate", "Sign in to a remote MCP "
        "server: open the authorization URL in a browser here and wait for it to come back",
        answer=Answer(type=one_status), query=("directory",), errors=_ERRORS,
    )  # fmt: skip
    async def auth_authenticate(name: str) -> Response:
        mcp, server = await named(name)
        flow = await start(mcp, server)
        if flow is None:
            mcp.reconnect(name)
            return await status_of(mcp, name)
        await oauth().open_browser(flow.authorization_url)
        try:
            await flow.wait()
        except McpSignInError as exc:
            return _json({"status": "failed", "error": str(exc)})
        return await status_of(mcp, name)

    @table.delete(
        "/mcp/{name}/auth", "mcp.auth.remove", "Sign out of an MCP server: its stored tokens "
        "and client are removed and it connects again without them",
        answer=Answer(type=_REMOVED), query=("directory",), errors=_ERRORS,
    )  # fmt: skip
    async def auth_remove(name: str) -> Response:
        mcp, _ = await named(name)
        oauth().logout(name)
        mcp.reconnect(name, connected_too=True)
        return _json({"success": True})


def _unreachable(what: str, exc: Exception) -> str:
    import httpx

    if isinstance(exc, httpx.HTTPError):
        return f"cannot reach {what}: {exc or type(exc).__name__}"
    raise exc
