"""Provider-neutral request schema: model references, content parts, messages, controls.

Every Struct is frozen and keyword-only; new fields get defaults and go last so
stored requests and recorded scripts keep decoding.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

__all__ = [
    "AssistantMessage",
    "FilePart",
    "GenerationControls",
    "LLMRequest",
    "Message",
    "ModelRef",
    "ReasoningPart",
    "SystemMessage",
    "TextPart",
    "ToolCallPart",
    "ToolDefinition",
    "ToolMessage",
    "ToolResultPart",
    "Usage",
    "UserMessage",
]


class ModelRef(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A catalog model: provider id, model id and optional variant (e.g. ``"high"``)."""

    provider_id: str
    model_id: str
    variant: str | None = None


class TextPart(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="text"):
    """Plain text."""

    text: str
    provider_metadata: dict[str, Any] | None = None


class FilePart(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="file"):
    """A file by URL (``data:`` URLs carry inline bytes)."""

    mime: str
    url: str
    filename: str | None = None


class ReasoningPart(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="reasoning"
):
    """Model reasoning; ``provider_metadata`` keeps signatures to echo back unmodified."""

    text: str
    provider_metadata: dict[str, Any] | None = None


class ToolCallPart(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="tool-call"
):
    """A tool call the model issued."""

    call_id: str
    name: str
    input: dict[str, Any]
    provider_executed: bool = False
    provider_metadata: dict[str, Any] | None = None


class ToolResultPart(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", tag="tool-result"
):
    """The outcome of one tool call; ``is_error`` and ``structured`` survive every adapter."""

    call_id: str
    name: str
    content: list[TextPart | FilePart]
    is_error: bool = False
    structured: Any = None
    provider_executed: bool = False
    provider_metadata: dict[str, Any] | None = None


class SystemMessage(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="role", tag="system"
):
    """A Mid-Conversation System Message, placed chronologically in the history."""

    text: str


class UserMessage(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="role", tag="user"
):
    """A user turn."""

    content: list[TextPart | FilePart]


class AssistantMessage(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="role", tag="assistant"
):
    """An assistant turn, including provider-executed tool results."""

    content: list[TextPart | ReasoningPart | ToolCallPart | ToolResultPart]


class ToolMessage(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="role", tag="tool"
):
    """Results of local tool calls, answering the preceding assistant turn."""

    content: list[ToolResultPart]


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage


class ToolDefinition(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A tool the model may call; ``input_schema`` is JSON Schema."""

    name: str
    description: str
    input_schema: dict[str, Any]


class GenerationControls(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Provider-neutral sampling and output controls; ``None`` leaves the provider default."""

    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] | None = None


class LLMRequest(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One provider turn.

    ``system`` is the Baseline System Context (top of the prompt); chronological
    instructions travel as ``SystemMessage`` entries in ``messages``. ``options``
    holds Model Request Options (provider-semantic, e.g. ``{"reasoning_effort": "high"}``),
    kept apart from ``generation`` (Generation Controls).
    """

    model: ModelRef
    system: list[str]
    messages: list[Message]
    tools: list[ToolDefinition] = []
    tool_choice: Literal["auto", "none", "required"] | str = "auto"
    generation: GenerationControls = msgspec.field(default_factory=GenerationControls)
    options: dict[str, Any] = {}
    prompt_cache_key: str | None = None
    headers: dict[str, str] = {}
    """HTTP headers sent with this request besides the route's (plugins' ``chat_headers``)."""


class Usage(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Token counts for one step; ``input_tokens`` excludes cache reads and writes."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
