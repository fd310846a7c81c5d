"""Routes: which protocol, endpoint and static headers/body a model is reached through."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

__all__ = ["ProtocolName", "Route", "WireRequest"]

ProtocolName: TypeAlias = Literal["openai-chat", "openai-responses", "anthropic-messages", "gemini"]


class Route(msgspec.Struct, frozen=True, kw_only=True):
    """Everything an adapter needs besides the request.

    Args:
        protocol: the wire protocol the endpoint speaks.
        base_url: endpoint base, e.g. ``https://api.openai.com/v1``.
        model_id: the model id sent on the wire.
        headers: static headers, including credentials, sent verbatim.
        body: compatibility body fields merged last into the top-level JSON body.
        reasoning: the model reasons (enables encrypted reasoning round-trips).
        native_system_messages: the endpoint accepts a chronological system role
            (OpenAI always does; Anthropic only on some models).
        reasoning_field: OpenAI-compatible servers: the assistant field that
            streams and echoes reasoning (``reasoning_content``, ``reasoning``...).
        default_max_output_tokens: output limit used when the request sets none
            (Anthropic requires one).
    """

    protocol: ProtocolName
    base_url: str
    model_id: str
    headers: dict[str, str] = {}
    body: dict[str, Any] = {}
    reasoning: bool = False
    native_system_messages: bool = False
    reasoning_field: str | None = None
    default_max_output_tokens: int | None = None


class WireRequest(msgspec.Struct, frozen=True, kw_only=True):
    """An encoded HTTP request: the adapter's output and the transport's input."""

    url: str
    headers: dict[str, str]
    body: bytes
    method: str = "POST"
