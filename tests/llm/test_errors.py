"""Every status and error body in the provider notes maps to the right class."""

import json

import httpx
import pytest

from runtime.llm import (
    classify_http_error,
    classify_message,
    classify_transport_error,
    is_context_overflow,
    parse_retry_after,
)


def _openai(message, type_, code):
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _anthropic(type_, message):
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_1"}


def _gemini(code, status, message, details=()):
    return {"error": {"code": code, "message": message, "status": status, "details": list(details)}}


HTTP_TABLE = [
    # OpenAI
    (
        429,
        _openai(
            "Rate limit reached for gpt-4.1 on tokens per min.", "tokens", "rate_limit_exceeded"
        ),
        "retryable",
    ),
    (
        429,
        _openai(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        ),
        "terminal",
    ),
    (
        500,
        _openai("The server had an error while processing your request.", "server_error", None),
        "retryable",
    ),
    (502, _openai("Bad gateway.", "server_error", None), "retryable"),
    (
        503,
        _openai(
            "The engine is currently overloaded, please try again later.", "server_error", None
        ),
        "retryable",
    ),
    (
        400,
        _openai(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        "context_overflow",
    ),
    (
        400,
        _openai(
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "invalid_request_error",
            None,
        ),
        "context_overflow",
    ),
    (
        401,
        _openai("Incorrect API key provided: sk-abc.", "invalid_request_error", "invalid_api_key"),
        "auth",
    ),
    (
        403,
        _openai("You are not allowed to sample from this model", "invalid_request_error", None),
        "auth",
    ),
    (400, _openai("Invalid value for 'tool_choice'.", "invalid_request_error", None), "terminal"),
    # Anthropic
    (
        429,
        _anthropic(
            "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
        ),
        "retryable",
    ),
    (529, _anthropic("overloaded_error", "Overloaded"), "retryable"),
    (500, _anthropic("api_error", "Internal server error"), "retryable"),
    (
        400,
        _anthropic("invalid_request_error", "prompt is too long: 202128 tokens > 200000 maximum"),
        "context_overflow",
    ),
    (
        400,
        _anthropic(
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 189136 + 20000 > 204648, decrease input length or `max_tokens` and try again",
        ),
        "context_overflow",
    ),
    (
        413,
        _anthropic("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        "context_overflow",
    ),
    (401, _anthropic("authentication_error", "invalid x-api-key"), "auth"),
    (
        403,
        _anthropic(
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        "auth",
    ),
    (
        400,
        _anthropic(
            "invalid_request_error", 'messages: roles must alternate between "user" and "assistant"'
        ),
        "terminal",
    ),
    # Gemini
    (
        429,
        _gemini(
            429,
            "RESOURCE_EXHAUSTED",
            "Resource has been exhausted (e.g. check quota).",
            [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34.4s"}],
        ),
        "retryable",
    ),
    (
        503,
        _gemini(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
        "retryable",
    ),
    (500, _gemini(500, "INTERNAL", "An internal error has occurred."), "retryable"),
    (
        400,
        _gemini(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
        ),
        "context_overflow",
    ),
    (
        400,
        _gemini(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}],
        ),
        "auth",
    ),
    (403, _gemini(403, "PERMISSION_DENIED", "Permission denied on resource project."), "auth"),
    # OpenAI-compatible servers
    (
        400,
        {
            "error": {
                "message": "prompt token count of 140000 exceeds the limit of 128000",
                "code": "model_max_prompt_tokens_exceeded",
            }
        },
        "context_overflow",
    ),
    (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens."
            }
        },
        "context_overflow",
    ),
    (
        400,
        {
            "error": {
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
            }
        },
        "context_overflow",
    ),
    (401, {"error": {"message": "No auth credentials found", "code": 401}}, "auth"),
    (408, {"error": "Request timeout"}, "retryable"),
    (409, {"error": "Conflict"}, "retryable"),
    (504, b"<html>Gateway Timeout</html>", "retryable"),
    (404, {"error": {"message": "model not found"}}, "terminal"),
]


@pytest.mark.parametrize(("status", "body", "kind"), HTTP_TABLE)
def test_http_error_table(status, body, kind):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    err = classify_http_error(status, raw, {})
    assert err.kind == kind, err
    assert err.status == status
    assert err.message


STREAM_TABLE = [
    (
        "context_length_exceeded",
        "Your input exceeds the context window of this model.",
        "context_overflow",
    ),
    ("insufficient_quota", "You exceeded your current quota", "terminal"),
    ("usage_not_included", "Usage is not included in your plan", "terminal"),
    ("invalid_prompt", "Invalid prompt: flagged", "terminal"),
    ("server_is_overloaded", "Server is overloaded", "retryable"),
    ("server_error", "An error occurred", "retryable"),
    ("overloaded_error", "overloaded_error: Overloaded", "retryable"),
    ("ThrottlingException", "Too many requests, please wait before trying again.", "retryable"),
    ("ServiceUnavailableException", "Service unavailable", "retryable"),
    ("ModelStreamErrorException", "Model stream error", "retryable"),
    ("InternalServerException", "Internal server error", "retryable"),
    ("ValidationException", "Input is too long for requested model.", "context_overflow"),
    ("AccessDeniedException", "You don't have access to the model", "auth"),
    (None, "prompt is too long: 250000 tokens > 200000 maximum", "context_overflow"),
    (None, "Throttling error: Too many tokens, please wait before trying again.", "retryable"),
]


@pytest.mark.parametrize(("code", "message", "kind"), STREAM_TABLE)
def test_stream_error_table(code, message, kind):
    assert classify_message(message, code=code).kind == kind


@pytest.mark.parametrize(
    "message",
    [
        "400 status code (no body)",
        "Requested token count exceeds the model's maximum context length of 131072 tokens",
        "prompt too long; exceeded max context length by 100 tokens",
        "Prompt has 9000 tokens, but the configured context size is 8192 tokens",
        "This endpoint's maximum context length is 8192 tokens",
        "Please reduce the length of the messages or completion.",
        "maximum prompt length is 131072",
    ],
)
def test_overflow_texts(message):
    assert is_context_overflow(message)


def test_rate_limit_text_is_never_overflow():
    assert not is_context_overflow(
        "Rate limit exceeded: request too large, maximum context length is 8 tokens"
    )


def test_retry_after_sources():
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"Retry-After-Ms": "1500", "retry-after": "9"}) == 1.5
    assert (
        parse_retry_after(
            {"retry-after": "Wed, 01 Jul 2026 00:00:10 GMT"}, now=lambda: 1782864000.0
        )
        == 10.0
    )
    body = json.dumps(_gemini(429, "RESOURCE_EXHAUSTED", "x", [{"retryDelay": "34.4s"}])).encode()
    assert parse_retry_after({}, body) == 34.4
    assert parse_retry_after({}) is None


def test_retry_after_only_on_retryable():
    err = classify_http_error(
        429, b'{"error":{"code":"rate_limit_exceeded","message":"slow"}}', {"retry-after": "3"}
    )
    assert (err.kind, err.retry_after) == ("retryable", 3.0)
    err = classify_http_error(
        400, b'{"error":{"code":"context_length_exceeded","message":"x"}}', {"retry-after": "3"}
    )
    assert (err.kind, err.retry_after) == ("context_overflow", None)


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError("connection refused"),
        httpx.ReadError("Connection reset by peer"),
        httpx.ReadTimeout("timed out"),
    ],
)
def test_transport_errors_are_retryable(exc):
    assert classify_transport_error(exc).kind == "retryable"
