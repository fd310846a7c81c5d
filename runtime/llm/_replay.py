"""Render LLM events as a provider's SSE stream, to replay scripts through real adapters."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._events import (
    LLMEvent,
    ProviderError,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolInputDelta,
    ToolInputStart,
)
from ._lowering import dumps, meta
from ._route import ProtocolName
from ._schema import Usage
from ._sse import SSEFrame, encode_sse

if TYPE_CHECKING:
    import httpx

__all__ = ["render_stream", "replay_transport"]

_Frames = list[SSEFrame]


def render_stream(events: Iterable[LLMEvent], protocol: ProtocolName) -> bytes:
    """The SSE body a *protocol* server would send for *events*.

    Decoding it with the protocol's adapter yields equivalent events (block ids
    may differ where the protocol has none of its own).
    """
    renderer = _RENDERERS[protocol]()
    frames: _Frames = []
    for event in events:
        frames.extend(renderer.event(event))
    frames.extend(renderer.end())
    return encode_sse(frames)


def replay_transport(
    scripts: Sequence[Sequence[LLMEvent]], protocol: ProtocolName
) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A ``MockTransport`` answering each request with the next script rendered for
    *protocol*, and the list it records requests into. Running out of scripts
    answers HTTP 500."""
    import httpx

    seen: list[httpx.Request] = []
    remaining = list(scripts)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if not remaining:
            return httpx.Response(500, json={"error": {"message": "no script left"}})
        body = render_stream(remaining.pop(0), protocol)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx.MockTransport(handler), seen


def _frame(obj: dict[str, Any], event: str | None = None) -> SSEFrame:
    return SSEFrame(data=dumps(obj).decode(), event=event)


class _Chat:
    _REASONS = {"tool-calls": "tool_calls", "content-filter": "content_filter"}

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.sent_args: set[str] = set()
        self.done = False

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> SSEFrame:
        return _frame(
            {"id": "replay", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        )

    def start(self, call_id: str, name: str) -> SSEFrame:
        self.index[call_id] = len(self.index)
        fn = {"name": name, "arguments": ""}
        call = {"index": self.index[call_id], "id": call_id, "type": "function", "function": fn}
        return self.chunk({"tool_calls": [call]})

    def args(self, call_id: str, text: str) -> SSEFrame:
        self.sent_args.add(call_id)
        return self.chunk(
            {"tool_calls": [{"index": self.index[call_id], "function": {"arguments": text}}]}
        )

    def event(self, e: LLMEvent) -> _Frames:
        if isinstance(e, StepStart):
            return [self.chunk({"role": "assistant", "content": ""})]
        if isinstance(e, TextDelta):
            return [self.chunk({"content": e.delta})]
        if isinstance(e, ReasoningDelta):
            return [self.chunk({"reasoning_content": e.delta})]
        if isinstance(e, ToolInputStart):
            return [self.start(e.call_id, e.name)]
        if isinstance(e, ToolInputDelta):
            return [self.args(e.call_id, e.delta)]
        if isinstance(e, ToolCall) and not e.provider_executed:
            frames = [] if e.call_id in self.index else [self.start(e.call_id, e.name)]
            if e.call_id not in self.sent_args:
                frames.append(self.args(e.call_id, dumps(e.input).decode()))
            return frames
        if isinstance(e, StepFinish):
            self.done = True
            u = e.usage
            usage = {
                "prompt_tokens": u.input_tokens + u.cache_read_tokens,
                "completion_tokens": u.output_tokens,
                "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
                "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            }
            return [
                self.chunk({}, self._REASONS.get(e.finish_reason, e.finish_reason)),
                _frame({"id": "replay", "choices": [], "usage": usage}),
                SSEFrame(data="[DONE]"),
            ]
        if isinstance(e, ProviderError):
            self.done = True
            return [_frame({"error": {"message": e.message, "code": e.code}})]
        return []

    def end(self) -> _Frames:
        return []


class _Anthropic:
    _REASONS = {
        "stop": "end_turn",
        "length": "max_tokens",
        "tool-calls": "tool_use",
        "content-filter": "refusal",
    }

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.sent_args: set[str] = set()

    def open(self, key: str, block: dict[str, Any]) -> SSEFrame:
        self.index[key] = len(self.index)
        return _frame(
            {"type": "content_block_start", "index": self.index[key], "content_block": block},
            "content_block_start",
        )

    def delta(self, key: str, delta: dict[str, Any]) -> SSEFrame:
        return _frame(
            {"type": "content_block_delta", "index": self.index[key], "delta": delta},
            "content_block_delta",
        )

    def stop(self, key: str) -> SSEFrame:
        return _frame(
            {"type": "content_block_stop", "index": self.index[key]}, "content_block_stop"
        )

    def event(self, e: LLMEvent) -> _Frames:
        if isinstance(e, StepStart):
            message = {
                "id": "replay",
                "role": "assistant",
                "content": [],
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
            return [_frame({"type": "message_start", "message": message}, "message_start")]
        if isinstance(e, TextStart):
            return [self.open(e.id, {"type": "text", "text": ""})]
        if isinstance(e, TextDelta):
            return [self.delta(e.id, {"type": "text_delta", "text": e.delta})]
        if isinstance(e, TextEnd):
            return [self.stop(e.id)]
        if isinstance(e, ReasoningStart):
            return [self.open(e.id, {"type": "thinking", "thinking": "", "signature": ""})]
        if isinstance(e, ReasoningDelta):
            return [self.delta(e.id, {"type": "thinking_delta", "thinking": e.delta})]
        if isinstance(e, ReasoningEnd):
            signature = meta(e.provider_metadata, "anthropic").get("signature")
            frames = (
                [self.delta(e.id, {"type": "signature_delta", "signature": signature})]
                if signature
                else []
            )
            return [*frames, self.stop(e.id)]
        if isinstance(e, ToolInputStart):
            return [
                self.open(
                    e.call_id, {"type": "tool_use", "id": e.call_id, "name": e.name, "input": {}}
                )
            ]
        if isinstance(e, ToolInputDelta):
            self.sent_args.add(e.call_id)
            return [self.delta(e.call_id, {"type": "input_json_delta", "partial_json": e.delta})]
        if isinstance(e, ToolCall) and not e.provider_executed:
            frames = (
                []
                if e.call_id in self.index
                else [
                    self.open(
                        e.call_id,
                        {"type": "tool_use", "id": e.call_id, "name": e.name, "input": {}},
                    )
                ]
            )
            if e.call_id not in self.sent_args:
                frames.append(
                    self.delta(
                        e.call_id,
                        {"type": "input_json_delta", "partial_json": dumps(e.input).decode()},
                    )
                )
            return [*frames, self.stop(e.call_id)]
        if isinstance(e, StepFinish):
            u = e.usage
            usage = {
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "cache_read_input_tokens": u.cache_read_tokens,
                "cache_creation_input_tokens": u.cache_write_tokens,
            }
            reason = self._REASONS.get(e.finish_reason, "end_turn")
            return [
                _frame(
                    {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage},
                    "message_delta",
                ),
                _frame({"type": "message_stop"}, "message_stop"),
            ]
        if isinstance(e, ProviderError):
            return [
                _frame(
                    {
                        "type": "error",
                        "error": {"type": e.code or "api_error", "message": e.message},
                    },
                    "error",
                )
            ]
        return []

    def end(self) -> _Frames:
        return []


class _Responses:
    def __init__(self) -> None:
        self.has_args: set[str] = set()

    def event(self, e: LLMEvent) -> _Frames:
        if isinstance(e, StepStart):
            return [_frame({"type": "response.created", "response": {"id": "replay"}})]
        if isinstance(e, TextStart):
            return [
                _frame(
                    {"type": "response.output_item.added", "item": {"id": e.id, "type": "message"}}
                )
            ]
        if isinstance(e, TextDelta):
            return [
                _frame({"type": "response.output_text.delta", "item_id": e.id, "delta": e.delta})
            ]
        if isinstance(e, TextEnd):
            return [
                _frame(
                    {"type": "response.output_item.done", "item": {"id": e.id, "type": "message"}}
                )
            ]
        if isinstance(e, ReasoningStart | ReasoningEnd):
            kind = "added" if isinstance(e, ReasoningStart) else "done"
            enc = meta(e.provider_metadata, "openai").get("encrypted_content")
            item = {"id": e.id, "type": "reasoning", "encrypted_content": enc}
            return [_frame({"type": f"response.output_item.{kind}", "item": item})]
        if isinstance(e, ReasoningDelta):
            return [
                _frame(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": e.id,
                        "delta": e.delta,
                    }
                )
            ]
        if isinstance(e, ToolInputStart):
            item = {
                "id": f"fc_{e.call_id}",
                "type": "function_call",
                "call_id": e.call_id,
                "name": e.name,
                "arguments": "",
            }
            return [_frame({"type": "response.output_item.added", "item": item})]
        if isinstance(e, ToolInputDelta):
            return [
                _frame(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": f"fc_{e.call_id}",
                        "delta": e.delta,
                    }
                )
            ]
        if isinstance(e, ToolCall) and not e.provider_executed:
            item = {
                "id": f"fc_{e.call_id}",
                "type": "function_call",
                "call_id": e.call_id,
                "name": e.name,
                "arguments": dumps(e.input).decode(),
            }
            return [_frame({"type": "response.output_item.done", "item": item})]
        if isinstance(e, StepFinish):
            usage = _openai_usage(e.usage)
            if e.finish_reason in ("length", "content-filter"):
                reason = "max_output_tokens" if e.finish_reason == "length" else "content_filter"
                response = {
                    "id": "replay",
                    "usage": usage,
                    "incomplete_details": {"reason": reason},
                }
                return [_frame({"type": "response.incomplete", "response": response})]
            return [
                _frame({"type": "response.completed", "response": {"id": "replay", "usage": usage}})
            ]
        if isinstance(e, ProviderError):
            return [_frame({"type": "error", "error": {"code": e.code, "message": e.message}})]
        return []

    def end(self) -> _Frames:
        return []


class _Gemini:
    _REASONS = {
        "stop": "STOP",
        "tool-calls": "STOP",
        "length": "MAX_TOKENS",
        "content-filter": "SAFETY",
    }

    def parts(self, *parts: dict[str, Any], extra: dict[str, Any] | None = None) -> SSEFrame:
        candidate = {
            "content": {"role": "model", "parts": list(parts)},
            "index": 0,
            **(extra or {}),
        }
        return _frame({"candidates": [candidate]})

    def event(self, e: LLMEvent) -> _Frames:
        if isinstance(e, TextDelta):
            return [self.parts({"text": e.delta})]
        if isinstance(e, ReasoningDelta):
            return [self.parts({"text": e.delta, "thought": True})]
        if isinstance(e, TextEnd | ReasoningEnd):
            signature = meta(e.provider_metadata, "google").get("thoughtSignature")
            part: dict[str, Any] = {"text": "", "thoughtSignature": signature}
            if isinstance(e, ReasoningEnd):
                part["thought"] = True
            return [self.parts(part)] if signature else []
        if isinstance(e, ToolCall) and not e.provider_executed:
            call: dict[str, Any] = {
                "functionCall": {"name": e.name, "args": e.input, "id": e.call_id}
            }
            signature = meta(e.provider_metadata, "google").get("thoughtSignature")
            if signature:
                call["thoughtSignature"] = signature
            return [self.parts(call)]
        if isinstance(e, StepFinish):
            u = e.usage
            usage = {
                "promptTokenCount": u.input_tokens + u.cache_read_tokens,
                "candidatesTokenCount": u.output_tokens - u.reasoning_tokens,
                "thoughtsTokenCount": u.reasoning_tokens,
                "cachedContentTokenCount": u.cache_read_tokens,
            }
            reason = self._REASONS.get(e.finish_reason, "OTHER")
            candidate = {
                "content": {"role": "model", "parts": [{"text": ""}]},
                "finishReason": reason,
                "index": 0,
            }
            return [_frame({"candidates": [candidate], "usageMetadata": usage})]
        if isinstance(e, ProviderError):
            return [
                _frame({"error": {"code": e.status or 500, "message": e.message, "status": e.code}})
            ]
        return []

    def end(self) -> _Frames:
        return []


def _openai_usage(u: Usage) -> dict[str, Any]:
    return {
        "input_tokens": u.input_tokens + u.cache_read_tokens,
        "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
    }


_RENDERERS: dict[ProtocolName, Callable[[], Any]] = {
    "openai-chat": _Chat,
    "openai-responses": _Responses,
    "anthropic-messages": _Anthropic,
    "gemini": _Gemini,
}
