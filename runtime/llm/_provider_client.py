"""``ProviderClient``: catalog + auth + routes + retries behind the ``LLMClient`` interface."""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec
import trio

from ._auth import ApiKeyCredential, Auth, Credential, OAuthCredential
from ._catalog import DEFAULT_BASE_URLS, Catalog, ModelLimit, ResolvedModel, overlay_generation
from ._cost import step_cost
from ._errors import AuthError, CatalogError
from ._events import LLMEvent, ProviderError, StepFinish
from ._lowering import LoweringCache
from ._protocols import ADAPTERS, ProtocolAdapter
from ._retry import RetryPolicy, stream_with_retry
from ._route import Route, WireRequest
from ._schema import LLMRequest, ModelRef, UserMessage
from ._transport import stream_wire

if TYPE_CHECKING:
    import httpx

__all__ = ["PreparedRequest", "ProviderClient"]

DEFAULT_IDLE_TIMEOUT = 120.0
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_ERROR_BODY_BYTES = 64 * 1024
DEFAULT_LOWERING_CACHE_ENTRIES = 4096


class PreparedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A routed, encoded request (what ``ProviderClient.prepare`` returns)."""

    route: Route
    wire: WireRequest
    request: LLMRequest
    resolved: ResolvedModel


class ProviderClient:
    """Streams ``LLMRequest``s to the provider the catalog routes their model to.

    Args:
        catalog: providers and models (models.dev plus config).
        auth: credential resolution.
        http_client: the shared ``httpx.AsyncClient`` (inject a ``MockTransport`` in tests).
        retry: attempts and backoff for retryable failures before output begins.
        idle_timeout: longest silence between body chunks before the attempt fails.
        max_frame_bytes: largest SSE frame accepted.
        max_error_body_bytes: how much of an error body is read for classification.
        lowering_cache_entries: history messages whose wire shape is kept between
            requests (OpenAI Chat and Responses lower message by message; 0 disables).
        rng: jitter source.
        sleep: backoff sleep (``trio.sleep``; virtual under ``MockClock``).
        now: wall clock for ``retry-after`` dates and token expiry.
    """

    def __init__(
        self,
        catalog: Catalog,
        auth: Auth,
        *,
        http_client: httpx.AsyncClient,
        retry: RetryPolicy | None = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_error_body_bytes: int = DEFAULT_MAX_ERROR_BODY_BYTES,
        lowering_cache_entries: int = DEFAULT_LOWERING_CACHE_ENTRIES,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = trio.sleep,
        now: Callable[[], float] = time.time,
        on_retry: Callable[[int, float, ProviderError], None] | None = None,
    ) -> None:
        self._catalog = catalog
        self._auth = auth
        self._http = http_client
        self._retry = retry or RetryPolicy()
        self._idle_timeout = idle_timeout
        self._max_frame_bytes = max_frame_bytes
        self._max_error_body_bytes = max_error_body_bytes
        self._lowered = LoweringCache(lowering_cache_entries)
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._now = now
        self._on_retry = on_retry

    def resolve_model(self, model: ModelRef) -> ResolvedModel:
        """The catalog entry *model* routes to (``ModelResolver``); no I/O.

        Raises:
            CatalogError: unknown provider, model or variant.
        """
        return self._catalog.resolve(model)

    def model_limit(self, model: ModelRef) -> ModelLimit | None:
        """*model*'s token limits from the catalog (``ModelLimits``); None for a model it
        does not know. No I/O."""
        try:
            return self._catalog.resolve(model).model.limit
        except CatalogError:
            return None

    async def prepare(self, request: LLMRequest) -> PreparedRequest:
        """Resolve, authenticate, merge option domains and encode *request*.

        Raises:
            CatalogError: unknown model or variant, unroutable provider.
            AuthError: the provider needs credentials and none are configured.
        """
        resolved = self._catalog.resolve(request.model)
        credential = await self._auth.credential_for(resolved.provider)
        route = self.route_for(resolved, credential, request)
        effective = _effective_request(request, resolved)
        wire = ADAPTERS[route.protocol].encode(effective, route, cache=self._lowered)
        return PreparedRequest(route=route, wire=wire, request=effective, resolved=resolved)

    def route_for(
        self, resolved: ResolvedModel, credential: Credential | None, request: LLMRequest
    ) -> Route:
        """Build the route: protocol from ``npm``, endpoint, auth and compatibility fields.

        Raises:
            CatalogError: no protocol or endpoint for the model.
            AuthError: credentials required but missing.
        """
        model, provider = resolved.model, resolved.provider
        protocol = model.protocol
        if protocol is None:
            raise CatalogError(f"no protocol adapter for package {model.npm!r} ({model.id})")
        adapter: ProtocolAdapter = ADAPTERS[protocol]
        oauth = credential if isinstance(credential, OAuthCredential) else None
        base = (
            (oauth.base_url if oauth else None)
            or provider.options.get("baseURL")
            or model.api
            or DEFAULT_BASE_URLS.get(model.npm)
        )
        if not base:
            raise CatalogError(f"no endpoint for {provider.id}/{model.id}")
        if credential is None and provider.env:
            raise AuthError(
                f"no credentials for {provider.id} (set one of {', '.join(provider.env)})"
            )
        headers: dict[str, str] = {}
        if isinstance(credential, ApiKeyCredential):
            headers.update(adapter.auth_headers(credential.key))
        elif oauth is not None:
            headers["authorization"] = f"Bearer {oauth.access}"
        headers.update({str(k): str(v) for k, v in (provider.options.get("headers") or {}).items()})
        headers.update(model.compat_headers)
        headers.update(request.headers)
        if oauth is not None:
            headers.update(oauth.headers)
            if "x-initiator" in oauth.headers:
                last = request.messages[-1] if request.messages else None
                headers["x-initiator"] = "user" if isinstance(last, UserMessage) else "agent"
        return Route(
            protocol=protocol,
            base_url=str(base),
            model_id=model.wire_id or model.id,
            headers=headers,
            body=dict(model.compat_body),
            reasoning=model.reasoning,
            native_system_messages=model.native_system_messages,
            reasoning_field=model.interleaved_field,
            default_max_output_tokens=model.limit.output or None,
        )

    async def stream(self, request: LLMRequest) -> AsyncIterator[LLMEvent]:
        """Stream one provider turn, retrying retryable failures until output begins.

        Failures (including unknown models and missing credentials) end the stream
        with a ``ProviderError``; nothing is raised except ``trio.Cancelled``, which
        closes the HTTP connection. ``StepFinish.cost`` is filled from catalog prices.
        """
        try:
            prepared = await self.prepare(request)
        except CatalogError as exc:
            yield ProviderError(kind="terminal", message=str(exc), code="catalog")
            return
        except AuthError as exc:
            yield ProviderError(kind="auth", message=str(exc))
            return
        adapter = ADAPTERS[prepared.route.protocol]
        cost = prepared.resolved.model.cost

        def attempt() -> AsyncIterator[LLMEvent]:
            return stream_wire(
                self._http,
                prepared.wire,
                adapter.new_decoder(prepared.route),
                idle_timeout=self._idle_timeout,
                max_frame_bytes=self._max_frame_bytes,
                max_error_body_bytes=self._max_error_body_bytes,
                now=self._now,
            )

        events = stream_with_retry(
            attempt, self._retry, rng=self._rng, sleep=self._sleep, on_retry=self._on_retry
        )
        try:
            async for event in events:
                if isinstance(event, StepFinish) and cost is not None:
                    event = msgspec.structs.replace(event, cost=step_cost(event.usage, cost))
                yield event
        finally:
            await events.aclose()  # type: ignore[attr-defined]


def _effective_request(request: LLMRequest, resolved: ResolvedModel) -> LLMRequest:
    """Catalog defaults under the request's own options and generation controls."""
    generation = overlay_generation(resolved.generation, request.generation)
    if not resolved.model.temperature and generation.temperature is not None:
        generation = msgspec.structs.replace(generation, temperature=None)
    options = {**resolved.request_options, **request.options}
    return msgspec.structs.replace(request, generation=generation, options=options)
