"""Events an ``LLMClient`` stream yields, in provider-neutral form."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from ._schema import Usage

__all__ = [
    "ErrorKind",
    "HostedToolResult",
    "LLMEvent",
    "ProviderError",
    "ReasoningDelta",
    "ReasoningEnd",
    "ReasoningStart",
    "StepFinish",
    "StepStart",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ToolCall",
    "ToolInputDelta",
    "ToolInputEnd",
    "ToolInputStart",
]

ErrorKind: TypeAlias = Literal["retryable", "context_overflow", "auth", "terminal"]


class StepStart(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="step-start"
):
    """The provider accepted the request and began a step."""


class StepFinish(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="step-finish"
):
    """The step ended.

    ``finish_reason`` is one of ``stop``, ``length``, ``tool-calls``,
    ``content-filter``, ``error`` or ``other``. ``cost`` is USD from catalog prices
    when the client knows them.
    """

    finish_reason: str
    usage: Usage
    provider_metadata: dict[str, Any] | None = None
    cost: float | None = None


class TextStart(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="text-start"
):
    """A text block opened."""

    id: str


class TextDelta(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="text-delta"
):
    """More text for block ``id``."""

    id: str
    delta: str


class TextEnd(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="text-end"
):
    """Text block ``id`` closed."""

    id: str
    provider_metadata: dict[str, Any] | None = None


class ReasoningStart(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="reasoning-start"
):
    """A reasoning block opened."""

    id: str
    provider_metadata: dict[str, Any] | None = None


class ReasoningDelta(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="reasoning-delta"
):
    """More reasoning text for block ``id``."""

    id: str
    delta: str


class ReasoningEnd(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="reasoning-end"
):
    """Reasoning block ``id`` closed; ``provider_metadata`` carries its signature."""

    id: str
    provider_metadata: dict[str, Any] | None = None


class ToolInputStart(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="tool-input-start"
):
    """The model began writing arguments for a tool call."""

    call_id: str
    name: str


class ToolInputDelta(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="tool-input-delta"
):
    """A raw JSON fragment of a tool call's arguments."""

    call_id: str
    delta: str


class ToolInputEnd(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="tool-input-end"
):
    """The arguments of a tool call are complete."""

    call_id: str


class ToolCall(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="tool-call"
):
    """A complete tool call with parsed arguments."""

    call_id: str
    name: str
    input: dict[str, Any]
    provider_executed: bool = False
    provider_metadata: dict[str, Any] | None = None


class HostedToolResult(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="hosted-tool-result"
):
    """The result of a tool the provider executed itself."""

    call_id: str
    name: str
    result: Any
    provider_metadata: dict[str, Any] | None = None


class ProviderError(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="provider-error"
):
    """A classified failure; always the last event of a stream.

    ``kind``: ``retryable`` (rate limits, overload, transport), ``context_overflow``
    (compact, never retry), ``auth`` or ``terminal``.
    """

    kind: ErrorKind
    message: str
    status: int | None = None
    retry_after: float | None = None
    code: str | None = None


LLMEvent: TypeAlias = (
    StepStart
    | StepFinish
    | TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolInputStart
    | ToolInputDelta
    | ToolInputEnd
    | ToolCall
    | HostedToolResult
    | ProviderError
)
