"""The requests of signing in to a remote MCP server, over httpx, each answer read by the
``mcp`` package's own OAuth models and helpers (``mcp.client.auth.utils``,
``mcp.shared.auth``): the ``initialize`` probe whose 401 starts it all, protected-resource
metadata (RFC 9728: the ``resource_metadata`` of ``WWW-Authenticate``, else the well-known
URLs), the authorization server's metadata (RFC 8414, and OpenID's), dynamic client
registration (RFC 7591) and the token endpoint (authorization code with PKCE, refresh).

The SDK's parts are imported at first need, in a worker thread (as ``_sdk.py`` does).
Every answer read here is bounded by ``McpOAuthLimits.max_body``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, urljoin, urlsplit

import msgspec
import trio

from runtime.mcp._oauth_store import McpClientInfo, McpTokens
from runtime.mcp._sdk import IMPORT_LOCK
from runtime.mcp._spec import McpServerSpec

if TYPE_CHECKING:
    import httpx

__all__ = [
    "CLIENT_NAME",
    "Discovery",
    "McpOAuthLimits",
    "McpSignInError",
    "Probe",
    "authorization_endpoint",
    "discover",
    "load_oauth_sdk",
    "origin",
    "probe",
    "register",
    "send_bounded",
    "token_endpoint",
    "token_request",
]

CLIENT_NAME: Final = "Kittiwake"
_PROBE_ID: Final = 1


class McpSignInError(Exception):
    """Signing in failed or cannot go on (a refused state, a token endpoint's refusal,
    unreadable metadata, no flow pending); the message says which."""


class McpOAuthLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds of signing in (seconds unless said).

    Attributes:
        request_timeout: each request to a server or its authorization server.
        flow_timeout: how long a started sign-in waits for the browser (OpenCode's 5 min).
        refresh_margin: tokens are refreshed this long before they expire.
        max_body: bytes read of any answer (metadata, registration, tokens, the probe).
    """

    request_timeout: float = 30.0
    flow_timeout: float = 300.0
    refresh_margin: float = 60.0
    max_body: int = 65536


_loaded: SimpleNamespace | None = None


def _import() -> SimpleNamespace:
    with IMPORT_LOCK:
        return _imported()


def _imported() -> SimpleNamespace:
    import mcp.client.auth
    import mcp.client.auth.utils
    import mcp.shared.auth
    import mcp.shared.auth_utils
    import mcp.types

    return SimpleNamespace(
        utils=mcp.client.auth.utils, auth=mcp.client.auth, models=mcp.shared.auth,
        auth_utils=mcp.shared.auth_utils, protocol_version=mcp.types.LATEST_PROTOCOL_VERSION,
    )  # fmt: skip


async def load_oauth_sdk() -> SimpleNamespace:
    """The SDK's OAuth parts, imported in a worker thread the first time. Cancellation
    abandons the wait, not the import."""
    global _loaded
    if _loaded is None:
        sdk = await trio.to_thread.run_sync(_import, abandon_on_cancel=True)
        _loaded = _loaded or sdk
    else:
        await trio.lowlevel.checkpoint()
    return _loaded


def origin(url: str) -> str:
    """``scheme://host[:port]`` of *url*."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def send_bounded(
    client: httpx.AsyncClient, request: httpx.Request, limit: int
) -> httpx.Response:
    """*request*'s answer with its body read (at most *limit* bytes), redirects not followed.

    Raises:
        McpSignInError: the body is longer than *limit*.
        httpx.HTTPError: the request failed.
    """
    import httpx

    response = await client.send(request, stream=True)
    try:
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise McpSignInError(f"{request.url} answered more than {limit} bytes")
    finally:
        await response.aclose()
    return httpx.Response(
            response.status_code, headers=response.headers, content=bytes(body),
        request=request,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Probe:
    """What a server answered a bare ``initialize`` (``body`` cut at ``max_body``)."""

    response: httpx.Response
    body: str


async def probe(
    client: httpx.AsyncClient, spec: McpServerSpec, token: str | None, limits: McpOAuthLimits
) -> Probe:
    """POST an ``initialize`` request to *spec*'s URL (with *token* as its bearer, if
    any) and read the answer's first ``max_body`` bytes; a session it opened is closed
    with a DELETE. Raises ``httpx.HTTPError`` when the server cannot be reached."""
    sdk = await load_oauth_sdk()
    headers = {**spec.headers, "accept": "application/json, text/event-stream"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    message = {
        "jsonrpc": "2.0", "id": _PROBE_ID, "method": "initialize",
        "params": {"protocolVersion": sdk.protocol_version, "capabilities": {},
                   "clientInfo": {"name": "kittiwake-sign-in", "version": "0.1.0"}},
    }  # fmt: skip
    async with client.stream("POST", spec.url, json=message, headers=headers) as response:
        body = bytearray()
        if response.is_success and "text/event-stream" in response.headers.get("content-type", ""):
            async for chunk in response.aiter_bytes():  # the first event is the answer
                body += chunk
                if b"\n\n" in body or b"\r\n\r\n" in body or len(body) >= limits.max_body:
                    break
        else:
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) >= limits.max_body:
                    break
    session = response.headers.get("mcp-session-id")
    if session is not None:
        with trio.move_on_after(limits.request_timeout):
            try:
                await client.delete(spec.url, headers={**headers, "mcp-session-id": session})
            except Exception as exc:  # closing the probe's session is a courtesy only
                if not _is_http_error(exc):
                    raise
    text = bytes(body[: limits.max_body]).decode("utf-8", "replace")
    return Probe(response=response, body=text)


def _is_http_error(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, httpx.HTTPError)


@dataclass(frozen=True, slots=True)
class Discovery:
    """Where a server sends its users to sign in.

    ``resource_metadata`` is the protected-resource metadata (None: the server publishes
    none, the 2025-03-26 way), ``metadata`` the authorization server's (None: none found,
    the SDK's fallbacks ``/authorize``, ``/token`` and ``/register`` on the server's origin
    apply), ``scope`` what to ask for.
    """

    resource_metadata: Any
    metadata: Any
    authorization_server: str | None
    scope: str | None
    resource: str
    metadata_url: str | None

    @property
    def authorization_endpoint(self) -> str:
        return str(self.metadata.authorization_endpoint) if self.metadata else ""

    @property
    def can_register(self) -> bool:
        """Whether dynamic registration may be tried (an authorization server without a
        ``registration_endpoint`` in its metadata does not take it)."""
        return self.metadata is None or self.metadata.registration_endpoint is not None


async def discover(
    client: httpx.AsyncClient, spec: McpServerSpec, challenge: httpx.Response | None,
    limits: McpOAuthLimits,
) -> Discovery:  # fmt: skip
    """Follow *challenge* (a 401 or 403 of *spec*'s URL; None: from the well-known URLs
    only) to the protected-resource metadata, then the first authorization server's
    metadata, checking that it names the issuer it was found for.

    Raises:
        McpSignInError: the metadata names another resource or issuer, or a metadata
            server failed (5xx).
        httpx.HTTPError: a request failed.
    """
    sdk = await load_oauth_sdk()
    utils = sdk.utils
    hinted = utils.extract_resource_metadata_from_www_auth(challenge) if challenge else None
    prm, found_at = None, None
    for url in utils.build_protected_resource_metadata_discovery_urls(hinted, spec.url):
        answer = await send_bounded(
            client, utils.create_oauth_metadata_request(url), limits.max_body
        )
        if answer.status_code >= 500:
            raise McpSignInError(f"{url} answered {answer.status_code}")
        prm = await utils.handle_protected_resource_response(answer)
        if prm is not None:
            found_at = url
            break
    canonical = sdk.auth_utils.resource_url_from_server_url(spec.url)
    resource = canonical
    server: str | None = None
    if prm is not None:
        named = str(prm.resource)
        if not sdk.auth_utils.check_resource_allowed(canonical, named):
            raise McpSignInError(f"{found_at} describes {named}, not {canonical}")
        resource = named
        server = str(prm.authorization_servers[0])
    metadata = None
    for url in utils.build_oauth_authorization_server_metadata_discovery_urls(server, spec.url):
        answer = await send_bounded(
            client, utils.create_oauth_metadata_request(url), limits.max_body
        )
        ok, found = await utils.handle_auth_metadata_response(answer)
        if not ok:
            raise McpSignInError(f"{url} answered {answer.status_code}")
        if found is not None:
            try:
                utils.validate_metadata_issuer(found, server or str(origin(spec.url)))
            except sdk.auth.OAuthFlowError as exc:
                raise McpSignInError(str(exc)) from None
            metadata = found
            break
    scope = spec.oauth_options.get("scope") or utils.get_client_metadata_scopes(
        utils.extract_scope_from_www_auth(challenge) if challenge else None, prm, metadata
    )
    return Discovery(
        resource_metadata=prm, metadata=metadata, authorization_server=server, scope=scope,
        resource=resource, metadata_url=found_at,
    )  # fmt: skip


async def register(
    client: httpx.AsyncClient, spec: McpServerSpec, found: Discovery, redirect_uri: str,
    limits: McpOAuthLimits,
) -> McpClientInfo:  # fmt: skip
    """Register Kittiwake as a public client (no secret, PKCE) with *found*'s
    authorization server (RFC 7591).

    Raises:
        McpSignInError: the server refused or answered something unreadable.
        httpx.HTTPError: the request failed.
    """
    sdk = await load_oauth_sdk()
    metadata = sdk.models.OAuthClientMetadata(
        redirect_uris=[redirect_uri], client_name=CLIENT_NAME, token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"], response_types=["code"],
        scope=found.scope,
    )  # fmt: skip
    request = sdk.utils.create_client_registration_request(
        found.metadata, metadata, origin(spec.url)
    )
    answer = await send_bounded(client, request, limits.max_body)
    try:
        info = await sdk.utils.handle_registration_response(answer)
    except sdk.auth.OAuthRegistrationError as exc:
        raise McpSignInError(str(exc)) from None
    return McpClientInfo(
        client_id=info.client_id or "", client_secret=info.client_secret,
        client_id_issued_at=info.client_id_issued_at,
        client_secret_expires_at=info.client_secret_expires_at or None,
        token_endpoint_auth_method=info.token_endpoint_auth_method,
    )  # fmt: skip


async def token_request(
    client: httpx.AsyncClient, endpoint: str, form: dict[str, str], info: McpClientInfo,
    limits: McpOAuthLimits, now: float, previous: McpTokens | None = None,
) -> McpTokens:  # fmt: skip
    """POST *form* to the token *endpoint* as *info*'s client (its secret in the body, in
    a Basic header, or none, as it was registered); the tokens it answers, ``expires_at``
    counted from *now*. A refresh answer without a refresh token keeps *previous*'s.

    Raises:
        McpSignInError: the endpoint refused (its answer quoted) or answered garbage.
        httpx.HTTPError: the request failed.
    """
    import httpx

    sdk = await load_oauth_sdk()
    form = {**form, "client_id": info.client_id}
    headers = {"content-type": "application/x-www-form-urlencoded", "accept": "application/json"}
    method = info.token_endpoint_auth_method or (
        "client_secret_post" if info.client_secret else "none"
    )
    if info.client_secret and method == "client_secret_basic":
        pair = f"{quote(info.client_id, safe='')}:{quote(info.client_secret, safe='')}"
        headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif info.client_secret and method == "client_secret_post":
        form["client_secret"] = info.client_secret
    request = httpx.Request("POST", endpoint, data=form, headers=headers)
    answer = await send_bounded(client, request, limits.max_body)
    if answer.status_code != 200:
        raise McpSignInError(f"{endpoint} refused ({answer.status_code}): {answer.text[:500]}")
    try:
        token = await sdk.utils.handle_token_response_scopes(answer)
    except sdk.auth.OAuthTokenError as exc:
        raise McpSignInError(str(exc)) from None
    refresh = token.refresh_token or (previous.refresh_token if previous else None)
    expires = now + int(token.expires_in) if token.expires_in is not None else None
    return McpTokens(
        access_token=token.access_token, refresh_token=refresh, expires_at=expires,
        scope=token.scope or (previous.scope if previous else None),
    )  # fmt: skip


def token_endpoint(spec: McpServerSpec, found: Discovery) -> str:
    """*found*'s token endpoint, else the SDK's fallback ``/token`` on the server's origin."""
    if found.metadata is not None:
        return str(found.metadata.token_endpoint)
    return urljoin(origin(spec.url), "/token")


def authorization_endpoint(spec: McpServerSpec, found: Discovery) -> str:
    """*found*'s authorization endpoint, else ``/authorize`` on the server's origin."""
    return found.authorization_endpoint or urljoin(origin(spec.url), "/authorize")
