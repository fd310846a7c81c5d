"""Google Gemini ``streamGenerateContent?alt=sse``."""

from __future__ import annotations

from typing import Any

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
    ToolCall,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
)
from ._lowering import data_url, dumps, meta, tool_result_text, wrap_system_update
from ._route import Route, WireRequest
from ._schema import (
    AssistantMessage,
    LLMRequest,
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

__all__ = ["SKIP_SIGNATURE", "GeminiDecoder", "encode_gemini"]

SKIP_SIGNATURE = "skip_thought_signature_validator"
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "MALFORMED_FUNCTION_CALL": "error"}
_FILTERED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
_SCHEMA_DROP = frozenset({"$schema", "additionalProperties", "$id", "$comment"})
_decode = msgspec.json.Decoder().decode


def encode_gemini(request: LLMRequest, route: Route) -> WireRequest:
    """Encode *request* as ``POST {base}/models/{model}:streamGenerateContent?alt=sse``.

    Gemini has no chronological system role: Mid-Conversation System Messages
    become wrapped user text.
    """
    body: dict[str, Any] = {"contents": _contents(request)}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": s} for s in request.system]}
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "parameters": _schema(t.input_schema),
                    }
                    for t in request.tools
                ]
            }
        ]
        body["toolConfig"] = {"functionCallingConfig": _tool_choice(request.tool_choice)}
    config = _generation_config(request)
    if config:
        body["generationConfig"] = config
    body.update(route.body)
    headers = {"content-type": "application/json", "accept": "text/event-stream", **route.headers}
    url = f"{route.base_url.rstrip('/')}/models/{route.model_id}:streamGenerateContent?alt=sse"
    return WireRequest(url=url, headers=headers, body=dumps(body))


def _generation_config(request: LLMRequest) -> dict[str, Any]:
    g = request.generation
    config: dict[str, Any] = {}
    if g.max_output_tokens is not None:
        config["maxOutputTokens"] = g.max_output_tokens
    if g.temperature is not None:
        config["temperature"] = g.temperature
    if g.top_p is not None:
        config["topP"] = g.top_p
    if g.top_k is not None:
        config["topK"] = g.top_k
    if g.stop:
        config["stopSequences"] = list(g.stop)
    thinking: dict[str, Any] = {}
    if request.options.get("thinking_budget") is not None:
        thinking["thinkingBudget"] = int(request.options["thinking_budget"])
    if request.options.get("reasoning_effort") is not None:
        thinking["thinkingLevel"] = request.options["reasoning_effort"]
    if request.options.get("include_thoughts") is not None:
        thinking["includeThoughts"] = bool(request.options["include_thoughts"])
    if thinking:
        config["thinkingConfig"] = thinking
    return config


def _tool_choice(choice: str) -> dict[str, Any]:
    if choice == "auto":
        return {"mode": "AUTO"}
    if choice == "none":
        return {"mode": "NONE"}
    if choice == "required":
        return {"mode": "ANY"}
    return {"mode": "ANY", "allowedFunctionNames": [choice]}


def _schema(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _schema(v) for k, v in schema.items() if k not in _SCHEMA_DROP}
    if isinstance(schema, list):
        return [_schema(v) for v in schema]
    return schema


def _contents(request: LLMRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in request.messages:
        if isinstance(message, SystemMessage):
            _append(out, "user", [{"text": wrap_system_update(message.text)}])
        elif isinstance(message, UserMessage):
            parts: list[dict[str, Any]] = []
            for p in message.content:
                if isinstance(p, TextPart):
                    parts.append({"text": p.text})
                elif (inline := data_url(p)) is not None:
                    parts.append({"inlineData": {"mimeType": inline[0], "data": inline[1]}})
                else:
                    parts.append({"fileData": {"mimeType": p.mime, "fileUri": p.url}})
            _append(out, "user", parts)
        elif isinstance(message, ToolMessage):
            _append(out, "user", [_function_response(p) for p in message.content])
        elif isinstance(message, AssistantMessage):
            model_parts = [x for p in message.content if (x := _model_part(p)) is not None]
            if model_parts:
                _append(out, "model", model_parts)
    return out


def _append(out: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    if out and out[-1]["role"] == role:
        out[-1]["parts"].extend(parts)
    else:
        out.append({"role": role, "parts": parts})


def _function_response(part: ToolResultPart) -> dict[str, Any]:
    response: dict[str, Any] = {"error" if part.is_error else "output": tool_result_text(part)}
    if part.structured is not None:
        response["structured"] = part.structured
    inner: dict[str, Any] = {"name": part.name}
    if not part.call_id.startswith("gemini-call-"):
        inner["id"] = part.call_id
    inner["response"] = response
    return {"functionResponse": inner}


def _model_part(part: Any) -> dict[str, Any] | None:
    signature = meta(getattr(part, "provider_metadata", None), "google").get("thoughtSignature")
    if isinstance(part, TextPart):
        out: dict[str, Any] = {"text": part.text}
    elif isinstance(part, ReasoningPart):
        if signature is None:
            return None
        out = {"text": part.text, "thought": True}
    elif isinstance(part, ToolCallPart) and not part.provider_executed:
        call: dict[str, Any] = {"name": part.name, "args": part.input}
        if not part.call_id.startswith("gemini-call-"):
            call["id"] = part.call_id
        out = {"functionCall": call}
        signature = signature or SKIP_SIGNATURE
    else:
        return None
    if signature is not None:
        out["thoughtSignature"] = signature
    return out


class GeminiDecoder:
    """Each SSE frame is a whole ``GenerateContentResponse``; function calls arrive whole."""

    def __init__(self) -> None:
        self._started = False
        self._open: tuple[str, str] | None = None  # (kind, id)
        self._signature: str | None = None
        self._blocks = 0
        self._calls = 0
        self._finish: str | None = None
        self._usage = Usage()
        self._done = False

    def feed(self, frame: SSEFrame) -> list[LLMEvent]:
        """Decode one SSE frame."""
        if self._done or not frame.data:
            return []
        chunk = _decode(frame.data)
        out: list[LLMEvent] = []
        if not self._started:
            self._started = True
            out.append(StepStart())
        if isinstance(chunk, dict) and chunk.get("error"):
            self._done = True
            err = chunk["error"]
            out.append(classify_message(str(err.get("message", "")), code=err.get("status")))
            return out
        if chunk.get("usageMetadata"):
            self._usage = _usage(chunk["usageMetadata"])
        for candidate in (chunk.get("candidates") or ())[:1]:
            for part in (candidate.get("content") or {}).get("parts") or ():
                out.extend(self._part(part))
            if candidate.get("finishReason"):
                reason = candidate["finishReason"]
                self._finish = (
                    "content-filter" if reason in _FILTERED else _FINISH.get(reason, "other")
                )
        return out

    def finish(self) -> list[LLMEvent]:
        """End of body: close blocks and finish the step, or fail if no finish reason came."""
        if self._done:
            return []
        self._done = True
        if self._finish is None:
            return [ProviderError(kind="retryable", message="stream ended before completion")]
        out = self._close()
        reason = "tool-calls" if self._calls and self._finish == "stop" else self._finish
        out.append(StepFinish(finish_reason=reason, usage=self._usage))
        return out

    def _part(self, part: dict[str, Any]) -> list[LLMEvent]:
        signature = part.get("thoughtSignature")
        if "functionCall" in part:
            return self._close() + self._call(part["functionCall"], signature)
        if "text" not in part:
            return []
        kind = "reasoning" if part.get("thought") else "text"
        out: list[LLMEvent] = []
        if self._open is None or self._open[0] != kind:
            if not part["text"] and signature is None:
                return []
            out.extend(self._close())
            self._open = (kind, f"{kind}-{self._blocks}")
            self._blocks += 1
            out.append(
                TextStart(id=self._open[1]) if kind == "text" else ReasoningStart(id=self._open[1])
            )
        if signature is not None:
            self._signature = signature
        if part["text"]:
            bid = self._open[1]
            out.append(
                TextDelta(id=bid, delta=part["text"])
                if kind == "text"
                else ReasoningDelta(id=bid, delta=part["text"])
            )
        return out

    def _call(self, call: dict[str, Any], signature: str | None) -> list[LLMEvent]:
        call_id = call.get("id") or f"gemini-call-{self._calls}"
        self._calls += 1
        args = call.get("args") or {}
        md = {"google": {"thoughtSignature": signature}} if signature else None
        return [
            ToolInputStart(call_id=call_id, name=call["name"]),
            ToolInputDelta(call_id=call_id, delta=dumps(args).decode()),
            ToolInputEnd(call_id=call_id),
            ToolCall(call_id=call_id, name=call["name"], input=args, provider_metadata=md),
        ]

    def _close(self) -> list[LLMEvent]:
        if self._open is None:
            return []
        kind, bid = self._open
        md = {"google": {"thoughtSignature": self._signature}} if self._signature else None
        self._open = None
        self._signature = None
        return [
            TextEnd(id=bid, provider_metadata=md)
            if kind == "text"
            else ReasoningEnd(id=bid, provider_metadata=md)
        ]


def _usage(raw: dict[str, Any]) -> Usage:
    cached = int(raw.get("cachedContentTokenCount") or 0)
    thoughts = int(raw.get("thoughtsTokenCount") or 0)
    return Usage(
        input_tokens=int(raw.get("promptTokenCount") or 0) - cached,
        output_tokens=int(raw.get("candidatesTokenCount") or 0) + thoughts,
        reasoning_tokens=thoughts,
        cache_read_tokens=cached,
    )
