"""Credentials: env vars, a 0600 credential store, config keys, and OAuth flows.

Resolution order for a provider: the config's ``options.apiKey`` (``{env:NAME}``
expands), then the credential store, then the catalog's env vars in order.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import tempfile
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec
import trio

from ._catalog import CatalogProvider
from ._errors import AuthError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "COPILOT_CLIENT_ID",
    "OPENAI_CLIENT_ID",
    "OPENAI_ISSUER",
    "ApiKeyCredential",
    "Auth",
    "Credential",
    "CredentialStore",
    "DeviceCode",
    "OAuthCredential",
    "Pkce",
    "copilot_device_login",
    "copilot_poll_token",
    "copilot_request_device_code",
    "jwt_account_id",
    "new_pkce",
    "openai_authorize_url",
    "openai_exchange_code",
    "openai_refresh",
]

COPILOT_CLIENT_ID = "Ov23li8tweQw6odWQebz"
COPILOT_API = "https://api.githubcopilot.com"
OPENAI_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
OPENAI_ISSUER = "https://auth.openai.com"
OPENAI_CODEX_BASE = "https://chatgpt.com/backend-api/codex"
OPENAI_REDIRECT = "http://localhost:1455/auth/callback"
_ENV_REF = re.compile(r"^\{env:([A-Za-z_][A-Za-z0-9_]*)\}$")


class ApiKeyCredential(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type", tag="api"
):
    """A static API key, and what else its login asked (``metadata``: a plugin's prompts'
    answers, OpenCode's ``ApiAuth.metadata``)."""

    key: str
    metadata: dict[str, str] = {}


class OAuthCredential(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="oauth"):
    """OAuth tokens; ``base_url`` and ``headers`` override the route when set."""

    access: str
    refresh: str | None = None
    expires_at: float | None = None
    account_id: str | None = None
    base_url: str | None = None
    headers: dict[str, str] = {}


Credential: TypeAlias = ApiKeyCredential | OAuthCredential
_store_type = dict[str, Credential]


class CredentialStore:
    """Credentials by provider id in ``<data_dir>/auth.json`` (mode 0600, atomic writes).

    Reads and writes are small local file operations done synchronously.
    """

    def __init__(self, data_dir: Path, *, filename: str = "auth.json") -> None:
        self.path = data_dir / filename

    def load(self) -> dict[str, Credential]:
        """All stored credentials; an absent file is empty.

        Raises:
            AuthError: the file exists but is not a valid credential map.
        """
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            return msgspec.json.decode(raw, type=_store_type)
        except msgspec.DecodeError as exc:  # malformed JSON, or not a credential map
            raise AuthError(f"corrupt credential store {self.path}: {exc}") from exc

    def get(self, provider_id: str) -> Credential | None:
        """The credential for *provider_id*, if stored."""
        return self.load().get(provider_id)

    def set(self, provider_id: str, credential: Credential) -> None:
        """Store *credential*, replacing any previous one."""
        data = self.load()
        data[provider_id] = credential
        self._write(data)

    def remove(self, provider_id: str) -> None:
        """Forget *provider_id*'s credential."""
        data = self.load()
        if data.pop(provider_id, None) is not None:
            self._write(data)

    def _write(self, data: dict[str, Credential]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".auth-", suffix=".tmp")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(msgspec.json.encode(data))
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


TokenRefresher: TypeAlias = Callable[[OAuthCredential], Awaitable[OAuthCredential]]


class Auth:
    """Resolves the credential for a provider.

    Args:
        env: the environment mapping (injected, never read from ``os.environ`` here).
        store: the credential store, if any.
        refreshers: per-provider functions that refresh expired OAuth tokens; a
            refreshed credential is written back to the store.
        refresh_margin: refresh this many seconds before ``expires_at``.
        now: wall clock in epoch seconds.
    """

    def __init__(
        self,
        *,
        env: Mapping[str, str],
        store: CredentialStore | None = None,
        refreshers: Mapping[str, TokenRefresher] | None = None,
        refresh_margin: float = 60.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._env = env
        self._store = store
        self._refreshers = dict(refreshers or {})
        self._margin = refresh_margin
        self._now = now

    async def credential_for(self, provider: CatalogProvider) -> Credential | None:
        """The provider's credential, refreshing expired OAuth tokens first.

        Raises:
            AuthError: a refresh failed. Cancellation propagates.
        """
        configured = provider.options.get("apiKey")
        if isinstance(configured, str) and configured:
            match = _ENV_REF.match(configured)
            key = self._env.get(match.group(1)) if match else configured
            if key:
                return ApiKeyCredential(key=key)
        stored = self._store.get(provider.id) if self._store is not None else None
        if isinstance(stored, OAuthCredential):
            return await self._fresh(provider.id, stored)
        if stored is not None:
            return stored
        for name in provider.env:
            if self._env.get(name):
                return ApiKeyCredential(key=self._env[name])
        return None

    async def _fresh(self, provider_id: str, credential: OAuthCredential) -> OAuthCredential:
        expires = credential.expires_at
        refresher = self._refreshers.get(provider_id)
        if expires is None or refresher is None or expires - self._margin > self._now():
            return credential
        refreshed = await refresher(credential)
        if self._store is not None:
            self._store.set(provider_id, refreshed)
        return refreshed


# GitHub Copilot device flow ------------------------------------------------------------


class DeviceCode(msgspec.Struct, frozen=True, kw_only=True):
    """What the user needs to authorise a device."""

    device_code: str
    user_code: str
    verification_uri: str
    interval: float = 5.0


async def copilot_request_device_code(
    client: httpx.AsyncClient,
    *,
    github_url: str = "https://github.com",
    client_id: str = COPILOT_CLIENT_ID,
) -> DeviceCode:
    """Start the device flow (``POST /login/device/code``).

    Raises:
        AuthError: non-200 answer or unexpected body. Cancellation propagates.
    """
    response = await client.post(
        f"{github_url}/login/device/code",
        json={"client_id": client_id, "scope": "read:user"},
        headers={"accept": "application/json"},
    )
    data = _json_or_fail(response, "device code request")
    try:
        return msgspec.convert(data, DeviceCode, strict=False)
    except msgspec.ValidationError as exc:
        raise AuthError(f"unexpected device code response: {exc}") from exc


async def copilot_poll_token(
    client: httpx.AsyncClient,
    code: DeviceCode,
    *,
    max_wait: float,
    github_url: str = "https://github.com",
    client_id: str = COPILOT_CLIENT_ID,
    poll_margin: float = 3.0,
    sleep: Callable[[float], Awaitable[None]] = trio.sleep,
) -> OAuthCredential:
    """Poll ``/login/oauth/access_token`` until the user authorises the device.

    Waits ``interval + poll_margin`` between polls (``slow_down`` adds 5 s or takes
    the server's interval). The token goes straight to ``api.githubcopilot.com``.

    Raises:
        AuthError: the server reported another error, or *max_wait* seconds passed.
            Cancellation propagates from the waits.
    """
    interval = code.interval
    body = {
        "client_id": client_id,
        "device_code": code.device_code,
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
    }
    with trio.move_on_after(max_wait):
        while True:
            response = await client.post(
                f"{github_url}/login/oauth/access_token",
                json=body,
                headers={"accept": "application/json"},
            )
            data = _json_or_fail(response, "device token poll")
            if data.get("access_token"):
                return _copilot_credential(str(data["access_token"]), github_url)
            error = data.get("error")
            if error == "slow_down":
                interval = float(data.get("interval") or interval + 5)
            elif error != "authorization_pending":
                raise AuthError(f"device authorisation failed: {error or data}")
            await sleep(interval + poll_margin)
    raise AuthError(f"device authorisation not completed within {max_wait} s")


async def copilot_device_login(
    client: httpx.AsyncClient,
    *,
    on_user_code: Callable[[DeviceCode], Awaitable[None]],
    max_wait: float,
    github_url: str = "https://github.com",
    client_id: str = COPILOT_CLIENT_ID,
    sleep: Callable[[float], Awaitable[None]] = trio.sleep,
) -> OAuthCredential:
    """The whole device flow: request a code, show it via *on_user_code*, poll.

    Raises:
        AuthError: see ``copilot_poll_token``.
    """
    code = await copilot_request_device_code(client, github_url=github_url, client_id=client_id)
    await on_user_code(code)
    return await copilot_poll_token(
        client, code, max_wait=max_wait, github_url=github_url, client_id=client_id, sleep=sleep
    )


def _copilot_credential(token: str, github_url: str) -> OAuthCredential:
    host = urllib.parse.urlparse(github_url).hostname or "github.com"
    base = COPILOT_API if host == "github.com" else f"https://copilot-api.{host}"
    headers = {"openai-intent": "conversation-edits", "x-initiator": "user"}
    return OAuthCredential(access=token, base_url=base, headers=headers)


# OpenAI (ChatGPT/Codex) PKCE ------------------------------------------------------------


class Pkce(msgspec.Struct, frozen=True, kw_only=True):
    """A PKCE verifier, its S256 challenge, and the ``state`` value."""

    verifier: str
    challenge: str
    state: str


def new_pkce(random_bytes: Callable[[int], bytes] = secrets.token_bytes) -> Pkce:
    """A fresh 43-character verifier, its challenge and a random state."""
    verifier = _b64url(random_bytes(32))
    challenge = _b64url(hashlib.sha256(verifier.encode()).digest())
    return Pkce(verifier=verifier, challenge=challenge, state=_b64url(random_bytes(24)))


def openai_authorize_url(
    pkce: Pkce,
    *,
    redirect_uri: str = OPENAI_REDIRECT,
    issuer: str = OPENAI_ISSUER,
    client_id: str = OPENAI_CLIENT_ID,
    originator: str = "kittiwake",
) -> str:
    """The browser URL that starts the authorisation-code flow."""
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": "openid profile email offline_access",
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
        "id_token_add_organizations": "true",
        "codex_cli_simplified_flow": "true",
        "state": pkce.state,
        "originator": originator,
    }
    return f"{issuer}/oauth/authorize?{urllib.parse.urlencode(query)}"


async def openai_exchange_code(
    client: httpx.AsyncClient,
    code: str,
    pkce: Pkce,
    *,
    state: str,
    redirect_uri: str = OPENAI_REDIRECT,
    issuer: str = OPENAI_ISSUER,
    client_id: str = OPENAI_CLIENT_ID,
    originator: str = "kittiwake",
    now: Callable[[], float] = time.time,
) -> OAuthCredential:
    """Exchange the callback's *code* for tokens after checking *state*.

    Raises:
        AuthError: state mismatch, non-200 answer or a body without tokens.
    """
    if not secrets.compare_digest(state, pkce.state):
        raise AuthError("OAuth state mismatch")
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": client_id,
        "code_verifier": pkce.verifier,
    }
    response = await client.post(f"{issuer}/oauth/token", data=form)
    return _openai_credential(_json_or_fail(response, "token exchange"), None, originator, now)


async def openai_refresh(
    client: httpx.AsyncClient,
    credential: OAuthCredential,
    *,
    issuer: str = OPENAI_ISSUER,
    client_id: str = OPENAI_CLIENT_ID,
    originator: str = "kittiwake",
    now: Callable[[], float] = time.time,
) -> OAuthCredential:
    """Refresh an expired access token.

    Raises:
        AuthError: no refresh token, or the server refused.
    """
    if not credential.refresh:
        raise AuthError("credential has no refresh token")
    form = {
        "grant_type": "refresh_token",
        "refresh_token": credential.refresh,
        "client_id": client_id,
    }
    response = await client.post(f"{issuer}/oauth/token", data=form)
    data = _json_or_fail(response, "token refresh")
    return _openai_credential(data, credential, originator, now)


def _openai_credential(
    data: dict[str, Any],
    previous: OAuthCredential | None,
    originator: str,
    now: Callable[[], float],
) -> OAuthCredential:
    access = data.get("access_token")
    if not isinstance(access, str):
        raise AuthError("token response has no access_token")
    account = jwt_account_id(str(data.get("id_token") or "")) or jwt_account_id(access)
    account = account or (previous.account_id if previous else None)
    headers = {"originator": originator}
    if account:
        headers["chatgpt-account-id"] = account
    expires_in = data.get("expires_in")
    return OAuthCredential(
        access=access,
        refresh=data.get("refresh_token") or (previous.refresh if previous else None),
        expires_at=now() + float(expires_in) if expires_in is not None else None,
        account_id=account,
        base_url=OPENAI_CODEX_BASE,
        headers=headers,
    )


def jwt_account_id(token: str) -> str | None:
    """The ChatGPT account id claim of a JWT (unverified), if present."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = msgspec.json.decode(
            base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        )
    except (ValueError, msgspec.DecodeError):
        return None
    if not isinstance(claims, dict):
        return None
    nested = claims.get("https://api.openai.com/auth") or {}
    orgs = claims.get("organizations") or [{}]
    for value in (
        claims.get("chatgpt_account_id"),
        nested.get("chatgpt_account_id"),
        orgs[0].get("id"),
    ):
        if isinstance(value, str) and value:
            return value
    return None


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _json_or_fail(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code != 200 or not isinstance(data, dict):
        raise AuthError(f"{what} failed: HTTP {response.status_code} {response.text[:200]}")
    return data
