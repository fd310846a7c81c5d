"""``kittiwake mcp debug``: what a remote server answers, and where signing in would go."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from runtime.mcp._discovery import McpSignInError, discover, probe
from runtime.mcp._oauth import McpOAuth, redirect_uri
from runtime.mcp._spec import McpServerSpec

if TYPE_CHECKING:
    import httpx

__all__ = ["diagnose"]


def _masked(secret: str) -> str:
    return f"{secret[:4]}***{secret[-4:]}" if len(secret) > 8 else "***"


async def diagnose(oauth: McpOAuth, spec: McpServerSpec) -> list[tuple[str, str]]:
    """``(label, value)`` lines about remote *spec*: its stored sign-in (secrets masked),
    the ``initialize`` exchange (status, ``WWW-Authenticate``, the answer's start; with the
    stored token as it is, never refreshed), and after a 401 the metadata the sign-in would
    follow. Changes nothing; a request that fails is reported as a line, not raised."""
    import httpx

    lines: list[tuple[str, str]] = [("server", spec.name), ("url", spec.url)]
    lines.append(("oauth", "off (oauth: false)" if not spec.oauth else "on"))
    lines.append(("redirect uri", redirect_uri(spec)))
    lines.append(("auth status", oauth.token_state(spec).replace("_", " ")))
    stored = oauth.store.load().get(spec.name)
    token: str | None = None
    if stored is not None and stored.server_url != spec.url:
        lines.append(("stored sign-in", f"for another URL ({stored.server_url}): not used"))
    elif stored is not None:
        if stored.tokens is not None:
            token = stored.tokens.access_token
            lines.append(("access token", _masked(token)))
            expires = stored.tokens.expires_at
            if expires is not None:
                when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
                lines.append(("expires", when + (" (expired)" if expires <= oauth.now() else "")))
            lines.append(("refresh token", "present" if stored.tokens.refresh_token else "none"))
        if stored.client_info is not None:
            lines.append(("client id", stored.client_info.client_id))
    if spec.oauth_options.get("clientId"):
        lines.append(("client id (configured)", str(spec.oauth_options["clientId"])))
    async with httpx.AsyncClient(timeout=oauth.limits.request_timeout) as client:
        try:
            answer = await probe(client, spec, token, oauth.limits)
        except httpx.HTTPError as exc:
            lines.append(("initialize", f"cannot reach {spec.url}: {exc or type(exc).__name__}"))
            return lines
        response = answer.response
        lines.append(("initialize", f"HTTP {response.status_code} {response.reason_phrase}"))
        challenge = response.headers.get("www-authenticate")
        if challenge:
            lines.append(("WWW-Authenticate", challenge))
        if answer.body:
            lines.append(("answer", answer.body.strip()))
        if response.status_code in (401, 403) and spec.oauth:
            lines += await _discovery_lines(client, oauth, spec, response)
    return lines


async def _discovery_lines(
    client: httpx.AsyncClient, oauth: McpOAuth, spec: McpServerSpec, challenge: httpx.Response
) -> list[tuple[str, str]]:
    import httpx

    try:
        found = await discover(client, spec, challenge, oauth.limits)
    except (McpSignInError, httpx.HTTPError) as exc:
        return [("discovery", f"failed: {exc}")]
    lines = [("resource metadata", found.metadata_url or "none published")]
    lines.append(("resource", found.resource))
    lines.append(("authorization server", found.authorization_server or "the server's origin"))
    if found.metadata is not None:
        metadata = found.metadata
        lines.append(("authorization endpoint", str(metadata.authorization_endpoint)))
        lines.append(("token endpoint", str(metadata.token_endpoint)))
        registration = metadata.registration_endpoint
        lines.append(("registration", str(registration) if registration else "not supported"))
    else:
        lines.append(("authorization server metadata", "none found"))
    if found.scope:
        lines.append(("scope", found.scope))
    return lines
