"""OpenCode's provider login routes over a Location's plugins (their ``auth`` hook):
``GET /provider/auth`` (the login methods by provider), ``POST
/provider/{providerID}/oauth/authorize`` (start an ``oauth`` method: the URL to open) and
``POST /provider/{providerID}/oauth/callback`` (finish it: the credential is stored in the
data dir's ``auth.json``, where provider requests find it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec
import trio
from quart import Response

from gateway.http import JSON, Answer, GatewayError, RouteTable, encode, request_directory
from runtime.llm import CredentialStore
from runtime.plugins import (
    AuthFailed,
    LocationPlugins,
    ProviderAuthAuthorization,
    ProviderAuthMethod,
    auth_shape,
)

if TYPE_CHECKING:
    from gateway.http import Gateway

__all__ = ["AuthorizeBody", "CallbackBody", "declare_auth"]

_ERRORS: Final = (
    "InvalidRequestError", "ProviderAuthOauthMissing", "ProviderAuthOauthCodeMissing",
    "ProviderAuthOauthCallbackFailed",
)  # fmt: skip


class AuthorizeBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``POST /provider/{providerID}/oauth/authorize``: the method's index among the
    provider's methods, and the answers to its prompts."""

    method: int
    inputs: dict[str, str] = {}


class CallbackBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``POST /provider/{providerID}/oauth/callback``: the method started, and the code the
    user was given (a ``code`` method's)."""

    method: int
    code: str | None = None


def declare_auth(table: RouteTable, gw: Gateway) -> None:
    """Declare the provider login routes on *table*."""

    async def plugins() -> LocationPlugins:
        location = await gw.rt.execution.current_location(str(request_directory(gw)))
        await location.plugins.wait_settled()
        return location.plugins

    def failed(provider: str, exc: AuthFailed) -> GatewayError:
        return GatewayError(exc.name, str(exc), providerID=provider)

    @table.get(
        "/provider/auth", "provider.auth", "The login methods the Location's plugins offer, "
        "by provider (their auth hook)",
        answer=Answer(type=dict[str, list[ProviderAuthMethod]]), query=("directory",),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def methods() -> Response:
        offered = (await plugins()).auth_methods()
        shown = {provider: auth_shape(found) for provider, found in offered.items()}
        return Response(encode(shown), status=200, content_type=JSON)

    @table.post(
        "/provider/{providerID}/oauth/authorize", "provider.oauth.authorize", "Start a "
        "provider's oauth login method: the URL to open and how the login ends",
        body=AuthorizeBody, answer=Answer(type=ProviderAuthAuthorization),
        query=("directory",), errors=_ERRORS,
    )  # fmt: skip
    async def authorize(body: AuthorizeBody, provider_id: str) -> Response:
        try:
            started = await (await plugins()).authorize(provider_id, body.method, body.inputs)
        except AuthFailed as exc:
            raise failed(provider_id, exc) from None
        shown = ProviderAuthAuthorization(
            url=started.url, method=started.method, instructions=started.instructions
        )
        return Response(encode(shown), status=200, content_type=JSON)

    @table.post(
        "/provider/{providerID}/oauth/callback", "provider.oauth.callback", "Finish a "
        "provider's oauth login (with the code the user was given): its credential is "
        "stored, and the provider's requests use it from the next turn on",
        body=CallbackBody, answer=Answer(type=bool), query=("directory",), errors=_ERRORS,
    )  # fmt: skip
    async def callback(body: CallbackBody, provider_id: str) -> Response:
        try:
            credential = await (await plugins()).finish(provider_id, body.method, body.code)
        except AuthFailed as exc:
            raise failed(provider_id, exc) from None
        store = CredentialStore(gw.rt.data_dir)
        await trio.to_thread.run_sync(store.set, provider_id, credential)
        return Response(encode(True), status=200, content_type=JSON)
