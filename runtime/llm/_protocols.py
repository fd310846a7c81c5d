"""The protocol registry: one adapter per wire protocol."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ._anthropic import AnthropicDecoder, encode_anthropic
from ._events import LLMEvent
from ._gemini import GeminiDecoder, encode_gemini
from ._openai_chat import ChatDecoder, encode_chat
from ._openai_responses import ResponsesDecoder, encode_responses
from ._route import ProtocolName, Route, WireRequest
from ._schema import LLMRequest
from ._sse import SSEFrame

__all__ = ["ADAPTERS", "ProtocolAdapter", "StreamDecoder"]


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
    encode: Callable[[LLMRequest, Route], WireRequest]
    new_decoder: Callable[[Route], StreamDecoder]
    auth_headers: Callable[[str], dict[str, str]]


def _bearer(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


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
        encode=encode_anthropic,
        new_decoder=lambda route: AnthropicDecoder(),
        auth_headers=lambda secret: {"x-api-key": secret},
    ),
    "gemini": ProtocolAdapter(
        name="gemini",
        encode=encode_gemini,
        new_decoder=lambda route: GeminiDecoder(),
        auth_headers=lambda secret: {"x-goog-api-key": secret},
    ),
}
