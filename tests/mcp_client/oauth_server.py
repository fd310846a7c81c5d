"""A protected MCP server and its authorization server, for the sign-in tests.

``python oauth_server.py AS_PORT MCP_PORT [--no-registration]`` serves, in one process:

- on AS_PORT a small OAuth authorization server speaking the real wire formats: RFC 8414
  metadata, RFC 7591 registration (left out of the metadata with ``--no-registration``),
  ``/authorize`` (approves at once: redirects to the client's ``redirect_uri`` with a code
  and the ``state`` it was given), ``/token`` (authorization code with PKCE S256 checked,
  and refresh, rotating the refresh token), plus two test controls: ``POST /expire``
  (every access token issued so far is refused from then on) and ``GET /log``;
- on MCP_PORT the ``mcp`` package's FastMCP over Streamable HTTP at ``/mcp``, a resource
  server of that authorization server (its protected-resource metadata, a 401 with
  ``WWW-Authenticate: Bearer ... resource_metadata=...``, tokens checked for their RFC
  8707 resource), with tools ``add`` and ``whoami``.

A client ``preset-client`` (no secret) is known without registering. It prints
``oauth-ready`` on standard error once both listen.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import sys
import time
from typing import Any
from urllib.parse import urlencode

import anyio
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import FastMCP
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

AS_PORT, MCP_PORT = int(sys.argv[1]), int(sys.argv[2])
REGISTRATION = "--no-registration" not in sys.argv
ISSUER = f"http://127.0.0.1:{AS_PORT}"
RESOURCE = f"http://127.0.0.1:{MCP_PORT}/mcp"
LIFETIME = 3600

clients: dict[str, dict[str, Any]] = {"preset-client": {"redirect_uris": None}}
codes: dict[str, dict[str, Any]] = {}
access: dict[str, dict[str, Any]] = {}
refresh: dict[str, dict[str, Any]] = {}
log: dict[str, Any] = {"registrations": [], "authorizations": [], "grants": [], "requests": []}


def error(code: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": code}, status_code=status)


async def metadata(request: Request) -> Response:
    body = {
        "issuer": ISSUER, "authorization_endpoint": f"{ISSUER}/authorize",
        "token_endpoint": f"{ISSUER}/token", "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"], "scopes_supported": ["mcp"],
    }  # fmt: skip
    if REGISTRATION:
        body["registration_endpoint"] = f"{ISSUER}/register"
    return JSONResponse(body)


async def register(request: Request) -> Response:
    if not REGISTRATION:
        return error("registration_not_supported", 404)
    body = await request.json()
    if not body.get("redirect_uris"):
        return JSONResponse({"error": "invalid_redirect_uri"}, status_code=400)
    client_id = f"client-{secrets.token_hex(4)}"
    clients[client_id] = {"redirect_uris": body["redirect_uris"]}
    log["registrations"].append(body)
    answer = {**body, "client_id": client_id, "client_id_issued_at": int(time.time())}
    return JSONResponse(answer, status_code=201)


async def authorize(request: Request) -> Response:
    query = request.query_params
    client = clients.get(query.get("client_id", ""))
    redirect = query.get("redirect_uri", "")
    if client is None or (client["redirect_uris"] and redirect not in client["redirect_uris"]):
        return error("invalid_client")
    if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256":
        return error("invalid_request")
    code = secrets.token_urlsafe(16)
    codes[code] = {
        "client_id": query["client_id"], "redirect_uri": redirect,
        "challenge": query["code_challenge"], "resource": query.get("resource"),
        "scope": query.get("scope"),
    }  # fmt: skip
    log["authorizations"].append(dict(query))
    return RedirectResponse(f"{redirect}?{urlencode({'code': code, 'state': query['state']})}", 302)


def issue(client_id: str, resource: str | None, scope: str | None) -> dict[str, Any]:
    token, renewal = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    grant = {"client_id": client_id, "resource": resource, "scope": scope or "mcp"}
    access[token] = {**grant, "expired": False}
    refresh[renewal] = grant
    return {
        "access_token": token, "token_type": "Bearer", "expires_in": LIFETIME,
        "refresh_token": renewal, "scope": grant["scope"],
    }  # fmt: skip


async def token(request: Request) -> Response:
    form = await request.form()
    kind = form.get("grant_type")
    if kind == "authorization_code":
        grant = codes.pop(str(form.get("code")), None)
        if grant is None or grant["client_id"] != form.get("client_id"):
            return error("invalid_grant")
        if grant["redirect_uri"] != form.get("redirect_uri"):
            return error("invalid_grant")
        digest = hashlib.sha256(str(form.get("code_verifier", "")).encode()).digest()
        if base64.urlsafe_b64encode(digest).decode().rstrip("=") != grant["challenge"]:
            return error("invalid_grant")
        log["grants"].append({"kind": kind, "resource": form.get("resource")})
        return JSONResponse(issue(grant["client_id"], grant["resource"], grant["scope"]))
    if kind == "refresh_token":
        grant = refresh.pop(str(form.get("refresh_token")), None)
        if grant is None or grant["client_id"] != form.get("client_id"):
            return error("invalid_grant")
        log["grants"].append({"kind": kind, "resource": form.get("resource")})
        return JSONResponse(issue(grant["client_id"], grant["resource"], grant["scope"]))
    return error("unsupported_grant_type")


async def expire(request: Request) -> Response:
    for grant in access.values():
        grant["expired"] = True
    return JSONResponse({"expired": len(access)})


async def show_log(request: Request) -> Response:
    return JSONResponse(log)


authorization_server = Starlette(
    routes=[
        Route("/.well-known/oauth-authorization-server", metadata),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
        Route("/expire", expire, methods=["POST"]),
        Route("/log", show_log),
    ]
)


class Verifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        grant = access.get(token)
        if grant is None or grant["expired"]:
            return None
        return AccessToken(
            token=token, client_id=grant["client_id"], scopes=grant["scope"].split(),
            resource=grant["resource"],
        )  # fmt: skip


server = FastMCP(
    "protected", host="127.0.0.1", port=MCP_PORT, token_verifier=Verifier(),
    auth=AuthSettings(
        issuer_url=ISSUER, resource_server_url=RESOURCE, required_scopes=["mcp"],
        validate_token_resource=True,
    ),
)  # fmt: skip


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def whoami() -> str:
    """The OAuth client the call's token was issued to."""
    token = get_access_token()
    return token.client_id if token is not None else "nobody"


def recorded(app: Any) -> Any:
    """*app*, noting the host and whether a bearer came with each HTTP request."""

    async def wrapper(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            bearer = headers.get(b"authorization", b"").startswith(b"Bearer ")
            host = headers.get(b"host", b"").decode()
            log["requests"].append({"host": host, "bearer": bearer, "path": scope["path"]})
        await app(scope, receive, send)

    return wrapper


def listening(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:*port* (connections wait until it is served)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


async def main() -> None:
    apps = [(authorization_server, AS_PORT), (recorded(server.streamable_http_app()), MCP_PORT)]
    sockets = [listening(port) for _, port in apps]
    print("oauth-ready", file=sys.stderr, flush=True)
    async with anyio.create_task_group() as group:
        for (app, _), sock in zip(apps, sockets, strict=True):
            group.start_soon(uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve, [sock])


if __name__ == "__main__":
    anyio.run(main)
