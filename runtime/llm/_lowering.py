"""Helpers shared by protocol adapters: JSON, tool inputs, system-message fallback."""

from __future__ import annotations

import base64
import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final, TypeVar

import msgspec

from ._events import LLMEvent, ToolCall, ToolInputEnd
from ._schema import FilePart, TextPart, ToolResultPart

__all__ = [
    "MAX_PROMPT_CACHE_KEY",
    "LoweringCache",
    "data_url",
    "dumps",
    "finish_tool_call",
    "meta",
    "parse_tool_input",
    "prompt_cache_key",
    "tool_result_payload",
    "tool_result_text",
    "wrap_system_update",
]

MAX_PROMPT_CACHE_KEY: Final = 64
"""Longest ``prompt_cache_key`` OpenAI accepts (a longer one is answered 400)."""
_HEX_SESSION: Final = re.compile(r"^ses_[0-9a-f]{64}$")
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()
M = TypeVar("M")
T = TypeVar("T")


class LoweringCache:
    """Wire shapes of history messages (and tool definitions) already lowered, by identity.

    A session sends the same immutable message objects turn after turn, so a protocol
    whose messages lower one by one lowers each of them once instead of on every request;
    the tool registry hands the same definitions turn after turn, so a protocol may keep
    each one's encoded JSON (``msgspec.Raw``) the same way.

    Args:
        max_entries: messages kept, least recently used out (0 keeps none). An entry holds
            its message, so a message's id cannot be reused while it is cached.

    Shapes are shared between requests and must not be mutated. Use from one thread.
    """

    def __init__(self, max_entries: int) -> None:
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        self._max = max_entries
        self._entries: OrderedDict[tuple[int, Hashable], tuple[object, Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def lower(self, message: M, variant: Hashable, build: Callable[[M], T]) -> T:
        """``build(message)``, computed once per message and *variant* (the route fields
        the shape depends on) while the entry stays cached."""
        key = (id(message), variant)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is message:
            self._entries.move_to_end(key)
            shape: T = entry[1]
            return shape
        shape = build(message)
        if self._max:
            self._entries[key] = (message, shape)
            if len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return shape


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


def prompt_cache_key(key: str) -> str:
    """*key* as sent on the wire, at most ``MAX_PROMPT_CACHE_KEY`` characters.

    A session id of ``ses_`` and 64 hex digits (an external id) loses its prefix, as
    OpenCode sends it; any other key over the limit is replaced by its SHA-256 in hex (64
    characters), so a session keeps one stable key. Shorter keys are sent unchanged.
    """
    if len(key) <= MAX_PROMPT_CACHE_KEY:
        return key
    if _HEX_SESSION.match(key):
        return key[4:]
    return hashlib.sha256(key.encode()).hexdigest()
