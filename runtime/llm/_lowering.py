"""Helpers shared by protocol adapters: JSON, tool inputs, system-message fallback."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import msgspec

from ._events import LLMEvent, ToolCall, ToolInputEnd
from ._schema import FilePart, TextPart, ToolResultPart

__all__ = [
    "data_url",
    "dumps",
    "finish_tool_call",
    "meta",
    "parse_tool_input",
    "tool_result_payload",
    "tool_result_text",
    "wrap_system_update",
]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def dumps(value: Any) -> bytes:
    """Deterministic compact JSON (insertion-ordered keys)."""
    return _encoder.encode(value)


def wrap_system_update(text: str) -> str:
    """User-role fallback for a Mid-Conversation System Message."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"<system-update>\n{escaped}\n</system-update>"


def parse_tool_input(raw: str) -> tuple[dict[str, Any], str | None]:
    """Parse streamed tool arguments; empty means ``{}``. Returns (input, error)."""
    if not raw.strip():
        return {}, None
    try:
        value = _decoder.decode(raw)
    except msgspec.DecodeError as exc:
        return {}, f"invalid JSON tool input: {exc}"
    if not isinstance(value, dict):
        return {}, "tool input is not a JSON object"
    return value, None


def finish_tool_call(
    call_id: str, name: str, raw: str, metadata: dict[str, Any] | None = None
) -> list[LLMEvent]:
    """``ToolInputEnd`` then ``ToolCall``; unparsable input is kept in metadata."""
    value, error = parse_tool_input(raw)
    if error is not None:
        metadata = {**(metadata or {}), "input_error": error, "raw_input": raw}
    return [
        ToolInputEnd(call_id=call_id),
        ToolCall(call_id=call_id, name=name, input=value, provider_metadata=metadata),
    ]


def tool_result_text(part: ToolResultPart) -> str:
    """The text of a tool result, files named inline."""
    chunks = [
        c.text if isinstance(c, TextPart) else f"[file {c.filename or c.mime}]"
        for c in part.content
    ]
    return "\n".join(chunks)


def tool_result_payload(part: ToolResultPart) -> str:
    """A tool result as one string; errors and structured values survive as JSON."""
    text = tool_result_text(part)
    if not part.is_error and part.structured is None:
        return text
    payload: dict[str, Any] = {"error" if part.is_error else "output": text}
    if part.structured is not None:
        payload["structured"] = part.structured
    return dumps(payload).decode()


def data_url(part: FilePart) -> tuple[str, str] | None:
    """Split a base64 ``data:`` URL into (mime, base64 data); ``None`` for other URLs."""
    if not part.url.startswith("data:"):
        return None
    header, _, payload = part.url.partition(",")
    mime = header[5:].split(";")[0] or part.mime
    if ";base64" not in header:
        payload = base64.b64encode(payload.encode()).decode()
    return mime, payload


def meta(metadata: Mapping[str, Any] | None, namespace: str) -> dict[str, Any]:
    """The provider's namespace of a part's ``provider_metadata``."""
    if not metadata:
        return {}
    value = metadata.get(namespace)
    return dict(value) if isinstance(value, Mapping) else {}
