"""The protocol registry: one adapter per wire protocol."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ._anthropic import AnthropicDecoder, encode_anthropic
from ._events import LLMEvent
from ._gemini import GeminiDecoder, encode_gemini
from ._lowering import LoweringCache
from ._openai_chat import ChatDecoder, encode_chat
from ._openai_responses import ResponsesDecoder, encode_responses
from ._route import ProtocolName, Route, WireRequest
from ._schema import LLMRequest
from ._sse import SSEFrame

__all__ = ["ADAPTERS", "Encoder", "ProtocolAdapter", "StreamDecoder"]


class Encoder(Protocol):
    """Encode a request for a route; a ``LoweringCache`` lets history messages be
    lowered once rather than on every request."""

    def __call__(
        self, request: LLMRequest, route: Route, *, cache: LoweringCache | None = None
    ) -> WireRequest:
        """The wire request."""
        ...


class StreamDecoder(Protocol):
    """A sans-IO state machine from SSE frames to LLM events."""

    def feed(self, frame: SSEFrame) -> list[LLMEvent]:
        """Decode one frame."""
        ...

    def finish(self) -> list[LLMEvent]:
        """The body ended; flush, or report a truncated stream."""
        ...


@dataclass(frozen=True, kw_only=True)
class ProtocolAdapter:
    """Pure encode/decode functions for one wire protocol."""

    name: ProtocolName
    encode: Encoder
    new_decoder: Callable[[Route], StreamDecoder]
    auth_headers: Callable[[str], dict[str, str]]


def _bearer(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


def _whole_history(encode: Callable[[LLMRequest, Route], WireRequest]) -> Encoder:
    """Anthropic and Gemini merge consecutive same-role messages into one turn and mark
    cache breakpoints on the last ones, so a message's wire shape depends on its
    neighbours: these protocols lower the whole history on every request."""

    def encoder(
        request: LLMRequest, route: Route, *, cache: LoweringCache | None = None
    ) -> WireRequest:
        return encode(request, route)

    return encoder


ADAPTERS: dict[ProtocolName, ProtocolAdapter] = {
    "openai-chat": ProtocolAdapter(
        name="openai-chat",
        encode=encode_chat,
        new_decoder=lambda route: ChatDecoder(reasoning_field=route.reasoning_field),
        auth_headers=_bearer,
    ),
    "openai-responses": ProtocolAdapter(
        name="openai-responses",
        encode=encode_responses,
        new_decoder=lambda route: ResponsesDecoder(),
        auth_headers=_bearer,
    ),
    "anthropic-messages": ProtocolAdapter(
        name="anthropic-messages",
        encode=_whole_history(encode_anthropic),
        new_decoder=lambda route: AnthropicDecoder(),
        auth_headers=lambda secret: {"x-api-key": secret},
    ),
    "gemini": ProtocolAdapter(
        name="gemini",
        encode=_whole_history(encode_gemini),
        new_decoder=lambda route: GeminiDecoder(),
        auth_headers=lambda secret: {"x-goog-api-key": secret},
    ),
}
