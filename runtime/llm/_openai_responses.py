"""OpenAI Responses API."""

from __future__ import annotations

from functools import partial
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
from ._lowering import (
    LoweringCache,
    data_url,
    dumps,
    finish_tool_call,
    meta,
    prompt_cache_key,
    tool_result_payload,
)
from ._route import Route, WireRequest
from ._schema import (
    AssistantMessage,
    LLMRequest,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolMessage,
    Usage,
    UserMessage,
)
from ._sse import SSEFrame

__all__ = ["ResponsesDecoder", "encode_responses"]

_OPTION_KEYS = ("parallel_tool_calls", "service_tier", "user")
_decode = msgspec.json.Decoder().decode


def encode_responses(
    request: LLMRequest, route: Route, *, cache: LoweringCache | None = None
) -> WireRequest:
    """Encode *request* as a streaming ``POST {base}/responses`` (stateless by default).

    With a *cache*, each history message is lowered once (per ``store`` setting).
    """
    store = bool(request.options.get("store", False))
    body: dict[str, Any] = {"model": route.model_id}
    if request.system:
        body["instructions"] = "\n\n".join(request.system)
    if cache is None:
        body["input"] = [item for m in request.messages for item in _items(m, store)]
    else:
        lower = partial(_items, store=store)
        body["input"] = [item for m in request.messages for item in cache.lower(m, store, lower)]
    body["stream"] = True
    body["store"] = store
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
                "strict": False,
            }
            for t in request.tools
        ]
        choice = request.tool_choice
        body["tool_choice"] = (
            choice
            if choice in ("auto", "none", "required")
            else {"type": "function", "name": choice}
        )
    g = request.generation
    if g.max_output_tokens is not None:
        body["max_output_tokens"] = g.max_output_tokens
    if g.temperature is not None:
        body["temperature"] = g.temperature
    if g.top_p is not None:
        body["top_p"] = g.top_p
    reasoning = _reasoning(request.options)
    if reasoning:
        body["reasoning"] = reasoning
    if not store and (route.reasoning or reasoning):
        body["include"] = ["reasoning.encrypted_content"]
    for key in _OPTION_KEYS:
        if key in request.options:
            body[key] = request.options[key]
    if request.prompt_cache_key is not None:
        body["prompt_cache_key"] = prompt_cache_key(request.prompt_cache_key)
    body.update(route.body)
    headers = {"content-type": "application/json", "accept": "text/event-stream", **route.headers}
    return WireRequest(
        url=route.base_url.rstrip("/") + "/responses", headers=headers, body=dumps(body)
    )


def _reasoning(options: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if options.get("reasoning_effort") is not None:
        out["effort"] = options["reasoning_effort"]
    if options.get("reasoning_summary") is not None:
        out["summary"] = options["reasoning_summary"]
    return out


def _items(message: Any, store: bool) -> list[dict[str, Any]]:
    if isinstance(message, SystemMessage):
        return [{"role": "system", "content": message.text}]
    if isinstance(message, UserMessage):
        content: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, TextPart):
                content.append({"type": "input_text", "text": part.text})
            elif part.mime.startswith("image/"):
                content.append({"type": "input_image", "image_url": part.url})
            else:
                inline = data_url(part)
                data = f"data:{inline[0]};base64,{inline[1]}" if inline else part.url
                content.append(
                    {"type": "input_file", "filename": part.filename or "file", "file_data": data}
                )
        return [{"role": "user", "content": content}]
    if isinstance(message, ToolMessage):
        return [
            {"type": "function_call_output", "call_id": p.call_id, "output": tool_result_payload(p)}
            for p in message.content
        ]
    assert isinstance(message, AssistantMessage)
    return _assistant_items(message, store)


def _assistant_items(message: AssistantMessage, store: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            if items and items[-1].get("role") == "assistant":
                items[-1]["content"].append({"type": "output_text", "text": part.text})
            else:
                items.append(
                    {"role": "assistant", "content": [{"type": "output_text", "text": part.text}]}
                )
        elif isinstance(part, ReasoningPart):
            m = meta(part.provider_metadata, "openai")
            if "item_id" not in m:
                continue
            if store:
                items.append({"type": "item_reference", "id": m["item_id"]})
                continue
            item: dict[str, Any] = {"type": "reasoning", "id": m["item_id"]}
            if m.get("encrypted_content") is not None:
                item["encrypted_content"] = m["encrypted_content"]
            item["summary"] = [{"type": "summary_text", "text": part.text}] if part.text else []
            items.append(item)
        elif isinstance(part, ToolCallPart) and not part.provider_executed:
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.call_id,
                    "name": part.name,
                    "arguments": dumps(part.input).decode(),
                }
            )
    return items


class ResponsesDecoder:
    """Responses stream events to LLM events."""

    def __init__(self) -> None:
        self._calls: dict[str, tuple[str, str]] = {}  # item_id -> (call_id, name)
        self._args: dict[str, list[str]] = {}
        self._texts: set[str] = set()
        self._summary_index: dict[str, int] = {}
        self._has_calls = False
        self._done = False

    def feed(self, frame: SSEFrame) -> list[LLMEvent]:
        """Decode one SSE frame; unknown event types are ignored."""
        if self._done or not frame.data or frame.data == "[DONE]":
            return []
        event = _decode(frame.data)
        kind = event.get("type", "")
        handler = _HANDLERS.get(kind)
        return handler(self, event) if handler is not None else []

    def finish(self) -> list[LLMEvent]:
        """End of body without a terminal event is a retryable failure."""
        if self._done:
            return []
        self._done = True
        return [ProviderError(kind="retryable", message="stream ended before completion")]

    def _created(self, event: dict[str, Any]) -> list[LLMEvent]:
        return [StepStart()]

    def _item_added(self, event: dict[str, Any]) -> list[LLMEvent]:
        item = event["item"]
        kind = item.get("type")
        if kind == "reasoning":
            md = {
                "openai": {
                    "item_id": item["id"],
                    "encrypted_content": item.get("encrypted_content"),
                }
            }
            return [ReasoningStart(id=item["id"], provider_metadata=md)]
        if kind == "function_call":
            self._calls[item["id"]] = (item["call_id"], item["name"])
            self._args[item["id"]] = []
            self._has_calls = True
            return [ToolInputStart(call_id=item["call_id"], name=item["name"])]
        return []

    def _summary_delta(self, event: dict[str, Any]) -> list[LLMEvent]:
        item_id = event["item_id"]
        index = event.get("summary_index", 0)
        previous = self._summary_index.setdefault(item_id, index)
        delta = event.get("delta", "")
        if index != previous:
            self._summary_index[item_id] = index
            delta = "\n\n" + delta
        return [ReasoningDelta(id=item_id, delta=delta)] if delta else []

    def _args_delta(self, event: dict[str, Any]) -> list[LLMEvent]:
        item_id = event["item_id"]
        if item_id not in self._calls or not event.get("delta"):
            return []
        self._args[item_id].append(event["delta"])
        return [ToolInputDelta(call_id=self._calls[item_id][0], delta=event["delta"])]

    def _text_delta(self, event: dict[str, Any]) -> list[LLMEvent]:
        item_id = event["item_id"]
        out: list[LLMEvent] = []
        if item_id not in self._texts:
            self._texts.add(item_id)
            out.append(TextStart(id=item_id))
        if event.get("delta"):
            out.append(TextDelta(id=item_id, delta=event["delta"]))
        return out

    def _item_done(self, event: dict[str, Any]) -> list[LLMEvent]:
        item = event["item"]
        kind = item.get("type")
        if kind == "reasoning":
            md = {
                "openai": {
                    "item_id": item["id"],
                    "encrypted_content": item.get("encrypted_content"),
                }
            }
            return [ReasoningEnd(id=item["id"], provider_metadata=md)]
        if kind == "function_call":
            call_id, name = self._calls.get(item["id"], (item["call_id"], item["name"]))
            raw = item.get("arguments") or "".join(self._args.get(item["id"], ()))
            return finish_tool_call(call_id, name, raw, {"openai": {"item_id": item["id"]}})
        if kind == "message":
            if item["id"] not in self._texts:
                return []
            return [TextEnd(id=item["id"], provider_metadata={"openai": {"item_id": item["id"]}})]
        if isinstance(kind, str) and kind.endswith("_call"):
            name = kind.removesuffix("_call")
            md = {"openai": {"item": item}}
            return [
                ToolCall(
                    call_id=item["id"],
                    name=name,
                    input=item.get("action") or {},
                    provider_executed=True,
                    provider_metadata=md,
                ),
                HostedToolResult(call_id=item["id"], name=name, result=item, provider_metadata=md),
            ]
        return []

    def _completed(self, event: dict[str, Any]) -> list[LLMEvent]:
        self._done = True
        response = event.get("response") or {}
        reason = "tool-calls" if self._has_calls else "stop"
        if event["type"] == "response.incomplete":
            detail = str((response.get("incomplete_details") or {}).get("reason"))
            reason = {"max_output_tokens": "length", "content_filter": "content-filter"}.get(
                detail, "other"
            )
        md = {"openai": {"response_id": response.get("id")}} if response.get("id") else None
        return [
            StepFinish(
                finish_reason=reason, usage=_usage(response.get("usage")), provider_metadata=md
            )
        ]

    def _error(self, event: dict[str, Any]) -> list[LLMEvent]:
        self._done = True
        error = event.get("error") or (event.get("response") or {}).get("error") or {}
        code = error.get("code") or error.get("type")
        message = str(error.get("message") or event.get("message") or "response failed")
        return [classify_message(message, code=str(code) if code else None)]


_HANDLERS = {
    "response.created": ResponsesDecoder._created,
    "response.output_item.added": ResponsesDecoder._item_added,
    "response.reasoning_summary_text.delta": ResponsesDecoder._summary_delta,
    "response.reasoning_text.delta": ResponsesDecoder._summary_delta,
    "response.function_call_arguments.delta": ResponsesDecoder._args_delta,
    "response.output_text.delta": ResponsesDecoder._text_delta,
    "response.output_item.done": ResponsesDecoder._item_done,
    "response.completed": ResponsesDecoder._completed,
    "response.incomplete": ResponsesDecoder._completed,
    "response.failed": ResponsesDecoder._error,
    "error": ResponsesDecoder._error,
}


def _usage(raw: dict[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    cached = int((raw.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0) - cached,
        output_tokens=int(raw.get("output_tokens") or 0),
        reasoning_tokens=int((raw.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
        cache_read_tokens=cached,
    )
