"""Signing in to remote MCP servers with OAuth, as OpenCode's users know it.

A server that answers 401 is ``needs_auth`` (``needs_client_registration`` when its
authorization server takes no dynamic registration and no ``oauth.clientId`` is
configured). :meth:`McpOAuth.start` follows the 401 to the server's protected-resource and
authorization-server metadata, registers Kittiwake as a client unless one is configured
or stored, and answers the authorization URL (PKCE S256, a random ``state``); the browser
comes back to a loopback listener (``http://127.0.0.1:19876/mcp/oauth/callback``, or the
server's ``oauth.callbackPort`` / ``oauth.redirectUri``), or the code is handed in by
:meth:`McpOAuth.finish`; on both paths the ``state`` must be the flow's. The tokens go to
``<data dir>/mcp-auth.json`` (0600, by server name, for that server URL only) and every
request of the server's connection carries them (:meth:`McpOAuth.auth`, the
``McpServers(auth=...)`` seam), refreshed ``refresh_margin`` before they expire and once
after a 401.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import parse_qs, urlencode, urlsplit

import msgspec
import trio

from runtime.mcp._callback import page, serve_callbacks
from runtime.mcp._discovery import (
    McpOAuthLimits,
    McpSignInError,
    authorization_endpoint,
    discover,
    load_oauth_sdk,
    probe,
    register,
    token_endpoint,
    token_request,
)
from runtime.mcp._oauth_store import McpAuthEntry, McpAuthStore, McpClientInfo
from runtime.mcp._server import McpAuthRequired
from runtime.mcp._spec import McpServerSpec

if TYPE_CHECKING:
    import httpx

__all__ = ["CALLBACK_PATH", "CALLBACK_PORT", "McpOAuth", "McpSignIn", "TokenState", "redirect_uri"]

_log = logging.getLogger("runtime.mcp")
CALLBACK_PORT: Final = 19876
CALLBACK_PATH: Final = "/mcp/oauth/callback"
NO_REGISTRATION: Final = (
    "Server does not support dynamic client registration. Please provide clientId in config."
)
_LINGER: Final = 2.0
"""Seconds a listener stays after its last sign-in ended (its answer page is being sent)."""
TokenState = Literal["authenticated", "expired", "not_authenticated"]


def redirect_uri(spec: McpServerSpec) -> str:
    """Where the browser is sent back: ``oauth.redirectUri``, else the loopback callback
    on ``oauth.callbackPort`` (default 19876)."""
    options = spec.oauth_options
    if options.get("redirectUri"):
        return str(options["redirectUri"])
    return f"http://127.0.0.1:{options.get('callbackPort') or CALLBACK_PORT}{CALLBACK_PATH}"


def _listen_on(uri: str) -> tuple[int, str]:
    parts = urlsplit(uri)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return port, parts.path or CALLBACK_PATH


class McpSignIn:
    """A started sign-in: open ``authorization_url`` in a browser, then :meth:`wait`."""

    def __init__(
        self, spec: McpServerSpec, url: str, state: str, verifier: str, client: McpClientInfo,
        token_endpoint: str, resource: str, on_done: Callable[[], None] | None,
    ) -> None:  # fmt: skip
        self.name = spec.name
        self.spec = spec
        self.authorization_url = url
        self.state = state
        self.redirect_uri = redirect_uri(spec)
        self.port, self.path = _listen_on(self.redirect_uri)
        self._verifier = verifier
        self._client = client
        self._token_endpoint = token_endpoint
        self._resource = resource
        self._on_done = on_done
        self.done = trio.Event()
        self.error: str | None = None
        """Why it failed (None while pending, and after success)."""
        self.listen_error: str | None = None
        """Why no listener waits for the browser (the code can still be handed in)."""
        self._completing = False

    async def wait(self) -> None:
        """Wait until the browser came back (or the code was handed in) and the tokens are
        stored. Cancellation abandons the wait, not the sign-in.

        Raises:
            McpSignInError: it failed, timed out, or no listener can hear the browser.
        """
        if self.listen_error is not None and not self.done.is_set():
            raise McpSignInError(self.listen_error)
        await self.done.wait()
        if self.error is not None:
            raise McpSignInError(self.error)


class McpOAuth:
    """Sign-ins to the remote MCP servers of every Location of one data dir.

    :meth:`run` hosts the loopback listeners and the flows' timeouts (whoever owns the
    runtime runs it); the rest is called from routes, the command line and connections.

    Args:
        data_dir: where ``mcp-auth.json`` is.
        limits: timeouts and bounds.
        now: the wall clock (epoch seconds) tokens' expiry is read against.
    """

    def __init__(
        self, data_dir: str, *, limits: McpOAuthLimits | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:  # fmt: skip
        self.store = McpAuthStore(data_dir)
        self.limits = limits or McpOAuthLimits()
        self.now = now
        self.open_browser: Callable[[str], Awaitable[bool]] = _open_browser
        """Opens a URL for the person signing in (``webbrowser``, so ``$BROWSER`` works);
        False when no browser could be started."""
        self._flows: dict[str, McpSignIn] = {}
        self._listeners: dict[int, trio.CancelScope] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host listeners and timeouts until cancelled; then every pending sign-in fails."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self._listeners.clear()
            for flow in list(self._flows.values()):
                self._fail(flow, "the sign-in stopped: Kittiwake is closing")

    # -- state ------------------------------------------------------------------------------

    def token_state(self, spec: McpServerSpec) -> TokenState:
        """OpenCode's auth status of *spec*'s stored tokens (for its URL only)."""
        entry = self.store.get(spec.name, spec.url)
        if entry is None or entry.tokens is None:
            return "not_authenticated"
        expires = entry.tokens.expires_at
        return "expired" if expires is not None and expires <= self.now() else "authenticated"

    def pending(self, name: str) -> McpSignIn | None:
        """The sign-in of *name* waiting for its code, if any."""
        return self._flows.get(name)

    def logout(self, name: str) -> bool:
        """Forget *name*'s tokens and client, and end its pending sign-in; whether anything
        was stored."""
        flow = self._flows.get(name)
        if flow is not None:
            self._fail(flow, "signed out")
        return self.store.remove(name)

    # -- the connection's side ----------------------------------------------------------------

    def auth(self, spec: McpServerSpec) -> httpx.Auth | None:
        """The ``McpAuth`` seam: the ``httpx.Auth`` of *spec*'s connection (None when its
        ``oauth`` is ``false``)."""
        if spec.type != "remote" or not spec.oauth:
            return None
        return _signed_in(self, spec)

    async def access_token(self, spec: McpServerSpec, *, stale: str | None = None) -> str | None:
        """The access token to send to *spec*'s server: the stored one, refreshed first when
        it expires within ``refresh_margin`` or is *stale* (the one a 401 refused). None
        without usable tokens (a refresh that was refused drops them).

        Raises:
            httpx.HTTPError: the token endpoint could not be reached.
        """
        entry = self.store.get(spec.name, spec.url)
        tokens = entry.tokens if entry is not None else None
        if tokens is None:
            return None
        if stale is None and not self._expiring(tokens.expires_at):
            return tokens.access_token
        async with self._locks.setdefault(spec.name, trio.Lock()):
            entry = self.store.get(spec.name, spec.url)
            current = entry.tokens if entry is not None else None
            if current is None or current != tokens:  # signed out, or refreshed meanwhile
                return current.access_token if current is not None else None
            assert entry is not None
            if (
                current.refresh_token is None
                or entry.client_info is None
                or not entry.token_endpoint
            ):
                expired = current.expires_at is not None and current.expires_at <= self.now()
                return None if expired or stale is not None else current.access_token
            return await self._refresh(spec, entry, current.refresh_token)

    def _expiring(self, expires_at: float | None) -> bool:
        return expires_at is not None and expires_at - self.limits.refresh_margin <= self.now()

    async def _refresh(self, spec: McpServerSpec, entry: McpAuthEntry, refresh: str) -> str | None:
        assert entry.client_info is not None and entry.token_endpoint is not None
        form = {"grant_type": "refresh_token", "refresh_token": refresh}
        if entry.resource:
            form["resource"] = entry.resource
        async with self._client() as client:
            try:
                tokens = await token_request(
                    client, entry.token_endpoint, form, entry.client_info, self.limits,
                    self.now(), entry.tokens,
                )  # fmt: skip
            except McpSignInError as exc:
                _log.info(
                    "MCP token refresh refused", extra={"server": spec.name, "error": str(exc)}
                )
                self.store.put(spec.name, msgspec.structs.replace(entry, tokens=None))
                return None
        self.store.put(spec.name, msgspec.structs.replace(entry, tokens=tokens))
        return tokens.access_token

    async def required(self, spec: McpServerSpec, challenge: httpx.Response) -> McpAuthRequired:
        """Why *spec*'s server refused (*challenge*, its 401): ``needs_client_registration``
        when its authorization server takes no registration and no client is configured or
        stored, else ``needs_auth``. Never raises but ``Cancelled``."""
        message = (
            f"{spec.url} answered {challenge.status_code}: sign in (kittiwake mcp auth {spec.name})"
        )
        entry = self.store.get(spec.name, spec.url)
        if spec.oauth_options.get("clientId") or (entry is not None and entry.client_info):
            return McpAuthRequired(message)
        try:
            async with self._client() as client:
                found = await discover(client, spec, challenge, self.limits)
        except Exception as exc:  # unreadable metadata: signing in will say so
            _log.info("MCP OAuth discovery failed", extra={"server": spec.name, "error": repr(exc)})
            return McpAuthRequired(message)
        if not found.can_register:
            return McpAuthRequired(NO_REGISTRATION, registration=True)
        return McpAuthRequired(message)

    # -- signing in -------------------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        import httpx

        return httpx.AsyncClient(timeout=self.limits.request_timeout, follow_redirects=False)

    async def start(
        self, spec: McpServerSpec, *, on_done: Callable[[], None] | None = None
    ) -> McpSignIn | None:
        """Start signing in to *spec*'s server; None when it accepts the stored tokens (or
        wants none). A sign-in of the same server still pending is ended. *on_done* is
        called once the tokens are stored (by either path).

        Raises:
            McpSignInError: *spec* is not a remote server with OAuth, the server answered
                neither a success nor 401/403, or its metadata is unreadable.
            McpAuthRequired: (``registration``) its authorization server takes no dynamic
                registration and no ``oauth.clientId`` is configured.
            httpx.HTTPError: a request failed.
        """
        if spec.type != "remote" or not spec.oauth:
            raise McpSignInError(f"MCP server {spec.name} does not support OAuth")
        if self._nursery is None:
            raise McpSignInError("signing in is not available: McpOAuth.run is not running")
        sdk = await load_oauth_sdk()
        token = await self.access_token(spec)
        async with self._client() as client:
            answer = (await probe(client, spec, token, self.limits)).response
            if answer.is_success:
                return None
            if answer.status_code not in (401, 403):
                raise McpSignInError(f"{spec.url} answered {answer.status_code}")
            found = await discover(client, spec, answer, self.limits)
            info = await self._client_info(client, spec, found)
        pkce = sdk.auth.PKCEParameters.generate()
        state = secrets.token_urlsafe(32)
        params = {
            "response_type": "code", "client_id": info.client_id,
            "redirect_uri": redirect_uri(spec), "state": state,
            "code_challenge": pkce.code_challenge, "code_challenge_method": "S256",
            "resource": found.resource,
        }  # fmt: skip
        if found.scope:
            params["scope"] = found.scope
        url = f"{authorization_endpoint(spec, found)}?{urlencode(params)}"
        flow = McpSignIn(
            spec, url, state, pkce.code_verifier, info, token_endpoint(spec, found),
            found.resource, on_done,
        )  # fmt: skip
        previous = self._flows.get(spec.name)
        if previous is not None:
            self._fail(previous, "another sign-in of this server started")
        self._flows[spec.name] = flow
        await self._listen(flow)
        self._nursery.start_soon(self._expire, flow)
        return flow

    async def _client_info(
        self, client: httpx.AsyncClient, spec: McpServerSpec, found: Any
    ) -> McpClientInfo:
        options = spec.oauth_options
        if options.get("clientId"):
            secret = options.get("clientSecret")
            return McpClientInfo(
                client_id=str(options["clientId"]), client_secret=secret,
                token_endpoint_auth_method="client_secret_post" if secret else "none",
            )  # fmt: skip
        entry = self.store.get(spec.name, spec.url)
        stored = entry.client_info if entry is not None else None
        if stored is not None and not (
            stored.client_secret_expires_at and stored.client_secret_expires_at <= self.now()
        ):
            return stored
        if not found.can_register:
            raise McpAuthRequired(NO_REGISTRATION, registration=True)
        try:
            info = await register(client, spec, found, redirect_uri(spec), self.limits)
        except McpSignInError as exc:
            raise McpAuthRequired(f"{NO_REGISTRATION} ({exc})", registration=True) from None
        kept = entry if entry is not None else McpAuthEntry(server_url=spec.url)
        self.store.put(spec.name, msgspec.structs.replace(kept, client_info=info))
        return info

    async def finish(self, name: str, code: str, state: str) -> None:
        """Hand in the *code* the browser was given for the pending sign-in of *name*; its
        *state* must be the flow's (else nothing changes and the flow keeps waiting).

        Raises:
            McpSignInError: no sign-in of *name* is pending, the state is not its own, or
                the token endpoint refused the code (the sign-in is then over).
            httpx.HTTPError: the token endpoint could not be reached.
        """
        flow = self._flows.get(name)
        if flow is None or flow._completing:
            raise McpSignInError(f"No pending OAuth flow for MCP server: {name}")
        if not secrets.compare_digest(state.encode(), flow.state.encode()):
            raise McpSignInError("OAuth state mismatch: the state is not the one this sign-in sent")
        await self._complete(flow, code)

    async def _complete(self, flow: McpSignIn, code: str) -> None:
        flow._completing = True
        form = {
            "grant_type": "authorization_code", "code": code, "redirect_uri": flow.redirect_uri,
            "code_verifier": flow._verifier, "resource": flow._resource,
        }  # fmt: skip
        try:
            async with self._client() as client:
                tokens = await token_request(
                    client, flow._token_endpoint, form, flow._client, self.limits, self.now()
                )
        except BaseException as exc:  # re-raised: a code is used once, so the flow is over
            if isinstance(exc, McpSignInError) or _is_http_error(exc):
                self._fail(flow, str(exc) or type(exc).__name__)
            flow._completing = flow.done.is_set()
            raise
        entry = self.store.get(flow.name, flow.spec.url) or McpAuthEntry(server_url=flow.spec.url)
        self.store.put(flow.name, msgspec.structs.replace(
            entry, tokens=tokens, client_info=flow._client, token_endpoint=flow._token_endpoint,
            resource=flow._resource,
        ))  # fmt: skip
        self._end(flow)
        if flow._on_done is not None:
            flow._on_done()

    def _end(self, flow: McpSignIn) -> None:
        if self._flows.get(flow.name) is flow:
            del self._flows[flow.name]
        flow.done.set()
        if not any(f.port == flow.port for f in self._flows.values()):
            scope = self._listeners.get(flow.port)
            if scope is not None:  # after the page that says so reached the browser
                scope.deadline = trio.current_time() + _LINGER

    def _fail(self, flow: McpSignIn, error: str) -> None:
        if not flow.done.is_set():
            flow.error = error
            self._end(flow)

    async def _expire(self, flow: McpSignIn) -> None:
        with trio.move_on_after(self.limits.flow_timeout):
            await flow.done.wait()
        self._fail(
            flow, f"OAuth callback timeout: no answer within {self.limits.flow_timeout:g} s. "
            f"If port {flow.port} is used by another application, configure a different "
            f'"callbackPort" in the server\'s oauth options.',
        )  # fmt: skip

    # -- the loopback listener --------------------------------------------------------------------

    async def _listen(self, flow: McpSignIn) -> None:
        if flow.port in self._listeners:
            self._listeners[flow.port].deadline = math.inf
            return
        assert self._nursery is not None
        try:
            await self._nursery.start(self._serve, flow.port)
        except OSError as exc:
            flow.listen_error = (
                f"cannot listen on 127.0.0.1:{flow.port} for the browser's answer: "
                f"{exc.strerror or exc}; configure another oauth.callbackPort"
            )

    async def _serve(self, port: int, *, task_status: trio.TaskStatus[None]) -> None:
        with trio.CancelScope() as scope:
            self._listeners[port] = scope
            try:
                await serve_callbacks(port, partial(self._callback, port), task_status=task_status)
            finally:
                if self._listeners.get(port) is scope:
                    del self._listeners[port]

    async def _callback(self, port: int, target: str) -> tuple[int, str]:
        """The browser's request to the listener on *port*: a code for a pending flow, whose
        ``state`` it must carry."""
        parts = urlsplit(target)
        on_port = [f for f in self._flows.values() if f.port == port]
        flows = [f for f in on_port if f.path == parts.path]
        if on_port and not flows:
            return 404, page("Not found", "No sign-in is waiting here.")
        query = parse_qs(parts.query)
        state = (query.get("state") or [""])[0]
        if not state:
            return 400, page("Sign-in refused", "Missing required state parameter.")
        flow = next(
            (f for f in flows if secrets.compare_digest(f.state.encode(), state.encode())), None
        )
        if flow is None or flow._completing:
            return 400, page("Sign-in refused", "Invalid or expired state parameter.")
        error = (query.get("error_description") or query.get("error") or [""])[0]
        if error:
            self._fail(flow, error)
            return 400, page("Sign-in failed", error)
        code = (query.get("code") or [""])[0]
        if not code:
            return 400, page("Sign-in failed", "No authorization code provided.")
        try:
            await self._complete(flow, code)
        except Exception as exc:
            if not (isinstance(exc, McpSignInError) or _is_http_error(exc)):
                raise
            return 400, page("Sign-in failed", str(exc))
        return 200, page(
            "Signed in", f"Kittiwake is signed in to {flow.name}. You can close this window."
        )


def _is_http_error(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, httpx.HTTPError)


async def _open_browser(url: str) -> bool:
    import webbrowser  # a sign-in's, not every start's

    return await trio.to_thread.run_sync(webbrowser.open, url, abandon_on_cancel=True)


def _signed_in(oauth: McpOAuth, spec: McpServerSpec) -> httpx.Auth:
    """An ``httpx.Auth`` sending *spec*'s stored token (refreshed as needed); a 401 after
    one refresh raises :class:`McpAuthRequired`."""
    import httpx

    class SignedIn(httpx.Auth):
        async def async_auth_flow(
            self, request: httpx.Request
        ) -> AsyncGenerator[httpx.Request, httpx.Response]:
            token = await oauth.access_token(spec)
            if token is not None:
                request.headers["authorization"] = f"Bearer {token}"
            response = yield request
            if response.status_code != 401:
                return
            if token is not None:
                fresh = await oauth.access_token(spec, stale=token)
                if fresh is not None and fresh != token:
                    request.headers["authorization"] = f"Bearer {fresh}"
                    response = yield request
                    if response.status_code != 401:
                        return
            raise await oauth.required(spec, response)

    return SignedIn()
