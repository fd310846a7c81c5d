"""Anthropic Messages API."""

from __future__ import annotations

from typing import Any

import msgspec

from ._errors import classify_message
from ._events import (
    HostedToolResult,
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
from ._lowering import data_url, dumps, finish_tool_call, meta, tool_result_text, wrap_system_update
from ._route import Route, WireRequest
from ._schema import (
    AssistantMessage,
    FilePart,
    LLMRequest,
    Message,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    Usage,
    UserMessage,
)
from ._sse import SSEFrame

__all__ = ["ANTHROPIC_VERSION", "AnthropicDecoder", "encode_anthropic"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
_MAX_CACHE_BREAKPOINTS = 4
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
}
_EPHEMERAL = {"type": "ephemeral"}
_decode = msgspec.json.Decoder().decode


def encode_anthropic(request: LLMRequest, route: Route) -> WireRequest:
    """Encode *request* as a streaming ``POST {base}/messages``.

    Mid-Conversation System Messages use the native ``system`` role only when the
    route allows it and the placement is valid; otherwise they become wrapped
    user text. Up to four cache breakpoints go on tools, system and the last two
    messages unless ``options["cache"]`` is false.
    """
    g = request.generation
    max_tokens = g.max_output_tokens or route.default_max_output_tokens or DEFAULT_MAX_TOKENS
    body: dict[str, Any] = {"model": route.model_id, "max_tokens": max_tokens}
    cache = bool(request.options.get("cache", True))
    if request.system:
        system: list[dict[str, Any]] = [{"type": "text", "text": s} for s in request.system]
        if cache:
            system[-1]["cache_control"] = _EPHEMERAL
        body["system"] = system
    messages = _messages(request.messages, route.native_system_messages)
    if cache:
        _mark_cache(
            messages,
            _MAX_CACHE_BREAKPOINTS - (1 if request.system else 0) - (1 if request.tools else 0),
        )
    body["messages"] = messages
    if request.tools:
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if cache:
            tools[-1]["cache_control"] = _EPHEMERAL
        body["tools"] = tools
        body["tool_choice"] = _tool_choice(request.tool_choice)
    _controls(body, request)
    body["stream"] = True
    body.update(route.body)
    headers = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "anthropic-version": ANTHROPIC_VERSION,
    }
    beta = request.options.get("anthropic_beta")
    if beta:
        headers["anthropic-beta"] = ",".join(beta)
    headers.update(route.headers)
    return WireRequest(
        url=route.base_url.rstrip("/") + "/messages", headers=headers, body=dumps(body)
    )


def _controls(body: dict[str, Any], request: LLMRequest) -> None:
    g = request.generation
    if g.temperature is not None:
        body["temperature"] = g.temperature
    if g.top_p is not None:
        body["top_p"] = g.top_p
    if g.top_k is not None:
        body["top_k"] = g.top_k
    if g.stop:
        body["stop_sequences"] = list(g.stop)
    budget = request.options.get("thinking_budget")
    if budget:
        body["thinking"] = {"type": "enabled", "budget_tokens": int(budget)}
    if request.options.get("reasoning_effort") is not None:
        body["output_config"] = {"effort": request.options["reasoning_effort"]}


def _tool_choice(choice: str) -> dict[str, Any]:
    if choice == "required":
        return {"type": "any"}
    if choice in ("auto", "none"):
        return {"type": choice}
    return {"type": "tool", "name": choice}


def _messages(history: list[Message], native_system: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, message in enumerate(history):
        if isinstance(message, SystemMessage):
            following = history[i + 1] if i + 1 < len(history) else None
            if native_system and _native_placement(out, following):
                out.append({"role": "system", "content": [{"type": "text", "text": message.text}]})
            else:
                _append(out, "user", [{"type": "text", "text": wrap_system_update(message.text)}])
        elif isinstance(message, UserMessage):
            _append(out, "user", [_user_block(p) for p in message.content])
        elif isinstance(message, ToolMessage):
            _append(out, "user", [_tool_result(p) for p in message.content])
        else:
            blocks = [b for p in message.content if (b := _assistant_block(p)) is not None]
            if blocks:
                _append(out, "assistant", blocks)
    return out


def _native_placement(out: list[dict[str, Any]], following: Message | None) -> bool:
    if not out or out[-1]["role"] != "user":
        return False
    return following is None or isinstance(following, AssistantMessage)


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def _user_block(part: TextPart | FilePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    inline = data_url(part)
    kind = "image" if part.mime.startswith("image/") else "document"
    if inline is None:
        return {"type": kind, "source": {"type": "url", "url": part.url}}
    return {"type": kind, "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}


def _tool_result(part: ToolResultPart) -> dict[str, Any]:
    text = tool_result_text(part)
    if part.structured is not None:
        text = (text + "\n" if text else "") + dumps(part.structured).decode()
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id, "content": text}
    if part.is_error:
        block["is_error"] = True
    return block


def _assistant_block(part: Any) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ReasoningPart):
        m = meta(part.provider_metadata, "anthropic")
        if "redacted_data" in m:
            return {"type": "redacted_thinking", "data": m["redacted_data"]}
        if "signature" in m:
            return {"type": "thinking", "thinking": part.text, "signature": m["signature"]}
        return None
    if isinstance(part, ToolCallPart | ToolResultPart) and part.provider_executed:
        block = meta(part.provider_metadata, "anthropic").get("block")
        return dict(block) if isinstance(block, dict) else None
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.call_id, "name": part.name, "input": part.input}
    return None


def _mark_cache(messages: list[dict[str, Any]], budget: int) -> None:
    for message in reversed(messages[-2:]):
        if budget <= 0:
            return
        for block in reversed(message["content"]):
            if block.get("type") not in ("thinking", "redacted_thinking"):
                block["cache_control"] = _EPHEMERAL
                budget -= 1
                break


class _Block:
    __slots__ = ("args", "id", "kind", "name", "raw", "signature")

    def __init__(self, kind: str, block_id: str, name: str = "", raw: dict[str, Any] | None = None):
        self.kind = kind
        self.id = block_id
        self.name = name
        self.args: list[str] = []
        self.signature = ""
        self.raw = raw or {}


class AnthropicDecoder:
    """Messages stream events to LLM events, blocks keyed by ``index``."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, int] = {}
        self._finish = "stop"
        self._has_calls = False
        self._done = False

    def feed(self, frame: SSEFrame) -> list[LLMEvent]:
        """Decode one SSE frame; ``ping`` and unknown types are ignored."""
        if self._done or not frame.data:
            return []
        event = _decode(frame.data)
        kind = event.get("type")
        if kind == "message_start":
            self._usage.update(_ints((event.get("message") or {}).get("usage")))
            return [StepStart()]
        if kind == "content_block_start":
            return self._start(event["index"], event["content_block"])
        if kind == "content_block_delta":
            return self._delta(event["index"], event["delta"])
        if kind == "content_block_stop":
            return self._stop(event["index"])
        if kind == "message_delta":
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                self._finish = _FINISH.get(reason, "other")
            self._usage.update(_ints(event.get("usage")))
            return []
        if kind == "message_stop":
            self._done = True
            return [StepFinish(finish_reason=self._finish, usage=_usage(self._usage))]
        if kind == "error":
            self._done = True
            err = event.get("error") or {}
            etype = err.get("type")
            message = f"{etype}: {err.get('message', '')}" if etype else str(err.get("message"))
            return [classify_message(message, code=etype)]
        return []

    def finish(self) -> list[LLMEvent]:
        """End of body without ``message_stop`` is a retryable failure."""
        if self._done:
            return []
        self._done = True
        return [ProviderError(kind="retryable", message="stream ended before completion")]

    def _start(self, index: int, block: dict[str, Any]) -> list[LLMEvent]:
        kind = block.get("type", "")
        bid = str(index)
        if kind == "text":
            self._blocks[index] = _Block("text", bid)
            out: list[LLMEvent] = [TextStart(id=bid)]
            if block.get("text"):
                out.append(TextDelta(id=bid, delta=block["text"]))
            return out
        if kind == "thinking":
            self._blocks[index] = _Block("thinking", bid)
            return [ReasoningStart(id=bid)]
        if kind == "redacted_thinking":
            md = {"anthropic": {"redacted_data": block.get("data", "")}}
            return [
                ReasoningStart(id=bid, provider_metadata=md),
                ReasoningEnd(id=bid, provider_metadata=md),
            ]
        if kind in ("tool_use", "server_tool_use"):
            self._blocks[index] = _Block(kind, block["id"], block["name"], block)
            self._has_calls = True
            return [ToolInputStart(call_id=block["id"], name=block["name"])]
        if kind.endswith("_tool_result"):
            call_id = block.get("tool_use_id", bid)
            md = {"anthropic": {"block": block}}
            return [
                HostedToolResult(
                    call_id=call_id,
                    name=kind.removesuffix("_tool_result"),
                    result=block.get("content"),
                    provider_metadata=md,
                )
            ]
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[LLMEvent]:
        block = self._blocks.get(index)
        if block is None:
            return []
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return [TextDelta(id=block.id, delta=delta["text"])]
        if kind == "thinking_delta" and delta.get("thinking"):
            return [ReasoningDelta(id=block.id, delta=delta["thinking"])]
        if kind == "signature_delta":
            block.signature += delta.get("signature", "")
        elif kind == "input_json_delta" and delta.get("partial_json"):
            block.args.append(delta["partial_json"])
            return [ToolInputDelta(call_id=block.id, delta=delta["partial_json"])]
        return []

    def _stop(self, index: int) -> list[LLMEvent]:
        block = self._blocks.pop(index, None)
        if block is None:
            return []
        if block.kind == "text":
            return [TextEnd(id=block.id)]
        if block.kind == "thinking":
            md = {"anthropic": {"signature": block.signature}} if block.signature else None
            return [ReasoningEnd(id=block.id, provider_metadata=md)]
        events = finish_tool_call(block.id, block.name, "".join(block.args))
        if block.kind == "server_tool_use":
            call = events[-1]
            assert isinstance(call, ToolCall)
            raw = {**block.raw, "input": call.input}
            events[-1] = ToolCall(
                call_id=call.call_id,
                name=call.name,
                input=call.input,
                provider_executed=True,
                provider_metadata={"anthropic": {"block": raw}},
            )
        return events


def _ints(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {k: int(v) for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}


def _usage(raw: dict[str, int]) -> Usage:
    return Usage(
        input_tokens=raw.get("input_tokens", 0),
        output_tokens=raw.get("output_tokens", 0),
        cache_read_tokens=raw.get("cache_read_input_tokens", 0),
        cache_write_tokens=raw.get("cache_creation_input_tokens", 0),
    )
