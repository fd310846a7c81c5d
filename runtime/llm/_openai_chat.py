"""OpenAI Chat Completions, also spoken by every OpenAI-compatible server."""

from __future__ import annotations

from functools import partial
from typing import Any, Final

import msgspec

from ._errors import classify_message
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
    ToolInputDelta,
    ToolInputStart,
)
from ._lowering import (
    LoweringCache,
    data_url,
    dumps,
    finish_tool_call,
    prompt_cache_key,
    tool_result_payload,
)
from ._route import Route, WireRequest
from ._schema import (
    AssistantMessage,
    FilePart,
    LLMRequest,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from ._sse import SSEFrame

__all__ = ["ChatDecoder", "encode_chat"]

_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}
_OPTION_KEYS = ("reasoning_effort", "parallel_tool_calls", "service_tier", "user", "store")
_REASONING_FIELDS = ("reasoning_content", "reasoning")
_decode = msgspec.json.Decoder().decode


def encode_chat(
    request: LLMRequest, route: Route, *, cache: LoweringCache | None = None
) -> WireRequest:
    """Encode *request* as a streaming ``POST {base}/chat/completions``.

    With a *cache*, each history message is lowered once (per reasoning field).
    """
    messages: list[dict[str, Any]] = [{"role": "system", "content": s} for s in request.system]
    if cache is None:
        for message in request.messages:
            messages.extend(_message(message, route))
    else:
        lower = partial(_message, route=route)
        for message in request.messages:
            messages.extend(cache.lower(message, route.reasoning_field, lower))
    body: dict[str, Any] = {"model": route.model_id, "messages": messages, "stream": True}
    body["stream_options"] = {"include_usage": True}
    if request.tools:
        if cache is None:
            body["tools"] = [_tool(t) for t in request.tools]
        else:  # the registry hands the same definitions turn after turn: encoded once
            body["tools"] = [cache.lower(t, _ENCODED_TOOL, _encoded_tool) for t in request.tools]
        body["tool_choice"] = _tool_choice(request.tool_choice)
    _generation(body, request, route)
    for key in _OPTION_KEYS:
        if key in request.options:
            body[key] = request.options[key]
    if request.prompt_cache_key is not None:
        body["prompt_cache_key"] = prompt_cache_key(request.prompt_cache_key)
    body.update(route.body)
    headers = {"content-type": "application/json", "accept": "text/event-stream", **route.headers}
    url = route.base_url.rstrip("/") + "/chat/completions"
    return WireRequest(url=url, headers=headers, body=dumps(body))


_ENCODED_TOOL: Final = "chat-tool"


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    }


def _encoded_tool(tool: ToolDefinition) -> msgspec.Raw:
    return msgspec.Raw(dumps(_tool(tool)))


def _generation(body: dict[str, Any], request: LLMRequest, route: Route) -> None:
    g = request.generation
    max_tokens = g.max_output_tokens
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if g.temperature is not None:
        body["temperature"] = g.temperature
    if g.top_p is not None:
        body["top_p"] = g.top_p
    if g.top_k is not None:
        body["top_k"] = g.top_k
    if g.stop:
        body["stop"] = list(g.stop)


def _tool_choice(choice: str) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _message(message: Any, route: Route) -> list[dict[str, Any]]:
    if isinstance(message, SystemMessage):
        return [{"role": "system", "content": message.text}]
    if isinstance(message, UserMessage):
        return [{"role": "user", "content": _user_content(message.content)}]
    if isinstance(message, ToolMessage):
        return [
            {"role": "tool", "tool_call_id": p.call_id, "content": tool_result_payload(p)}
            for p in message.content
        ]
    assert isinstance(message, AssistantMessage)
    out = _assistant(message, route)
    if out["content"] is None and len(out) == 2:
        return []  # nothing this protocol carries (reasoning without a field): no empty turn
    return [out]


def _user_content(parts: list[TextPart | FilePart]) -> Any:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.text})
        elif part.mime.startswith("image/"):
            out.append({"type": "image_url", "image_url": {"url": part.url}})
        else:
            inline = data_url(part)
            file: dict[str, Any] = {"filename": part.filename or "file"}
            file["file_data"] = f"data:{inline[0]};base64,{inline[1]}" if inline else part.url
            out.append({"type": "file", "file": file})
    return out


def _assistant(message: AssistantMessage, route: Route) -> dict[str, Any]:
    text = "".join(p.text for p in message.content if isinstance(p, TextPart))
    reasoning = "".join(p.text for p in message.content if isinstance(p, ReasoningPart))
    calls = [
        {
            "id": p.call_id,
            "type": "function",
            "function": {"name": p.name, "arguments": dumps(p.input).decode()},
        }
        for p in message.content
        if isinstance(p, ToolCallPart) and not p.provider_executed
    ]
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if reasoning and route.reasoning_field:
        out[route.reasoning_field] = reasoning
    if calls:
        out["tool_calls"] = calls
    return out


class _Call:
    __slots__ = ("args", "call_id", "name")

    def __init__(self, call_id: str, name: str) -> None:
        self.call_id = call_id
        self.name = name
        self.args: list[str] = []


class ChatDecoder:
    """Chat Completions chunks to events: one step per stream."""

    def __init__(self, *, reasoning_field: str | None = None) -> None:
        fields = (reasoning_field,) if reasoning_field else ()
        self._reasoning_fields = fields + tuple(f for f in _REASONING_FIELDS if f not in fields)
        self._started = False
        self._text: str | None = None
        self._reasoning: str | None = None
        self._blocks = 0
        self._calls: dict[int, _Call] = {}
        self._finish: str | None = None
        self._usage = Usage()
        self._done = False

    def feed(self, frame: SSEFrame) -> list[LLMEvent]:
        """Decode one SSE frame."""
        if self._done or not frame.data:
            return []
        if frame.data == "[DONE]":
            return self._step_finish()
        chunk = _decode(frame.data)
        out: list[LLMEvent] = []
        if not self._started:
            self._started = True
            out.append(StepStart())
        if isinstance(chunk, dict) and chunk.get("error") is not None:
            return out + self._error(chunk["error"])
        if chunk.get("usage"):
            self._usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or ():
            out.extend(self._choice(choice))
        return out

    def finish(self) -> list[LLMEvent]:
        """End of body: a stream cut before its finish reason is a retryable failure."""
        if self._done:
            return []
        if self._finish is None:
            self._done = True
            return [ProviderError(kind="retryable", message="stream ended before completion")]
        return self._step_finish()

    def _choice(self, choice: dict[str, Any]) -> list[LLMEvent]:
        out: list[LLMEvent] = []
        delta = choice.get("delta") or {}
        for field in self._reasoning_fields:
            piece = delta.get(field)
            if isinstance(piece, str) and piece:
                out.extend(self._reasoning_delta(piece))
                break
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.extend(self._close_reasoning())
            if self._text is None:
                self._text = f"text-{self._blocks}"
                self._blocks += 1
                out.append(TextStart(id=self._text))
            out.append(TextDelta(id=self._text, delta=content))
        for call in delta.get("tool_calls") or ():
            out.extend(self._tool_delta(call))
        if choice.get("finish_reason"):
            self._finish = _FINISH.get(choice["finish_reason"], "other")
            out.extend(self._close_all())
        return out

    def _reasoning_delta(self, piece: str) -> list[LLMEvent]:
        out: list[LLMEvent] = []
        if self._reasoning is None:
            self._reasoning = f"reasoning-{self._blocks}"
            self._blocks += 1
            out.append(ReasoningStart(id=self._reasoning))
        out.append(ReasoningDelta(id=self._reasoning, delta=piece))
        return out

    def _tool_delta(self, call: dict[str, Any]) -> list[LLMEvent]:
        out: list[LLMEvent] = []
        index = call.get("index", len(self._calls))
        fn = call.get("function") or {}
        state = self._calls.get(index)
        if state is None:
            out.extend(self._close_reasoning())
            state = _Call(call.get("id") or f"call-{index}", fn.get("name") or "")
            self._calls[index] = state
            out.append(ToolInputStart(call_id=state.call_id, name=state.name))
        args = fn.get("arguments")
        if args:
            state.args.append(args)
            out.append(ToolInputDelta(call_id=state.call_id, delta=args))
        return out

    def _close_reasoning(self) -> list[LLMEvent]:
        if self._reasoning is None:
            return []
        rid, self._reasoning = self._reasoning, None
        return [ReasoningEnd(id=rid)]

    def _close_all(self) -> list[LLMEvent]:
        out = self._close_reasoning()
        if self._text is not None:
            out.append(TextEnd(id=self._text))
            self._text = None
        for index in sorted(self._calls):
            call = self._calls[index]
            out.extend(finish_tool_call(call.call_id, call.name, "".join(call.args)))
        self._calls.clear()
        return out

    def _step_finish(self) -> list[LLMEvent]:
        self._done = True
        out = self._close_all()
        out.append(StepFinish(finish_reason=self._finish or "stop", usage=self._usage))
        return out

    def _error(self, error: Any) -> list[LLMEvent]:
        self._done = True
        if isinstance(error, dict):
            code = error.get("code") or error.get("type")
            err = classify_message(str(error.get("message", "")), code=str(code) if code else None)
        else:
            err = classify_message(str(error))
        return [err]


def _usage(raw: dict[str, Any]) -> Usage:
    prompt = int(raw.get("prompt_tokens") or 0)
    cached = int((raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    reasoning = int((raw.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    return Usage(
        input_tokens=prompt - cached,
        output_tokens=int(raw.get("completion_tokens") or 0),
        reasoning_tokens=reasoning,
        cache_read_tokens=cached,
    )
