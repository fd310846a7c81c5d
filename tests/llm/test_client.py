"""ProviderClient: routing, retries under virtual time, cancellation, config-only providers."""

import json
import random

import httpx
import pytest
import trio

from runtime.llm import (
    Auth,
    Catalog,
    LLMRequest,
    ModelRef,
    ProviderClient,
    ProviderError,
    RetryPolicy,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextPart,
    TextStart,
    Usage,
    UserMessage,
)

from . import streams
from .conftest import Reply

ENV = {"ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-openai"}
HELLO = streams.sse(
    {
        "type": "message_start",
        "message": {
            "id": "m",
            "role": "assistant",
            "content": [],
            "usage": {"input_tokens": 3, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hello"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
    event_names=True,
)
HELLO_EVENTS = [
    StepStart(),
    TextStart(id="0"),
    TextDelta(id="0", delta="hello"),
    TextEnd(id="0"),
    StepFinish(finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=2)),
]


def ask(provider="anthropic", model="claude-sonnet-4-5", text="hi") -> LLMRequest:
    return LLMRequest(
        model=ModelRef(provider_id=provider, model_id=model),
        system=[],
        messages=[UserMessage(content=[TextPart(text=text)])],
    )


def scripted_transport(responses, seen):
    """MockTransport replaying (status, headers, body) in order, noting trio time per request."""
    queue = list(responses)

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(trio.current_time())
        status, headers, body = queue.pop(0)
        return httpx.Response(status, headers=headers, content=body)

    return httpx.MockTransport(handler)


def make_client(models_dev, transport, **kwargs) -> tuple[ProviderClient, httpx.AsyncClient]:
    http = httpx.AsyncClient(transport=transport)
    catalog = Catalog.from_models_dev(models_dev)
    kwargs.setdefault("rng", random.Random(7))
    return ProviderClient(catalog, Auth(env=ENV), http_client=http, **kwargs), http


async def collect(client, request):
    return [
        (
            e
            if not isinstance(e, StepFinish)
            else StepFinish(finish_reason=e.finish_reason, usage=e.usage)
        )
        async for e in client.stream(request)
    ]


RATE_LIMITED = (
    429,
    {"retry-after": "2"},
    b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
)
OVERLOADED = (
    529,
    {},
    b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
)
OVERFLOW = (
    400,
    {},
    b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 202128 tokens > 200000 maximum"}}',
)
OK = (200, {"content-type": "text/event-stream"}, HELLO)


class TestRetries:
    async def test_429_with_retry_after_waits_exactly_two_seconds(self, autojump_clock, models_dev):
        seen: list[float] = []
        client, http = make_client(models_dev, scripted_transport([RATE_LIMITED, OK], seen))
        async with http:
            events = await collect(client, ask())
        assert events == HELLO_EVENTS
        assert len(seen) == 2
        assert seen[1] - seen[0] == pytest.approx(2.0)

    async def test_retry_after_ms_wins(self, autojump_clock, models_dev):
        seen: list[float] = []
        limited = (429, {"retry-after-ms": "1500", "retry-after": "9"}, RATE_LIMITED[2])
        client, http = make_client(models_dev, scripted_transport([limited, OK], seen))
        async with http:
            assert await collect(client, ask()) == HELLO_EVENTS
        assert seen[1] - seen[0] == pytest.approx(1.5)

    async def test_backoff_doubles_with_jitter_and_attempts_are_bounded(
        self, autojump_clock, models_dev
    ):
        seen: list[float] = []
        policy = RetryPolicy(max_attempts=3, base_delay=1.0, jitter=0.2)
        client, http = make_client(
            models_dev, scripted_transport([OVERLOADED] * 3, seen), retry=policy
        )
        async with http:
            events = await collect(client, ask())
        assert events == [
            ProviderError(
                kind="retryable",
                message="overloaded_error: Overloaded",
                status=529,
                code="overloaded_error",
            )
        ]
        gaps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
        assert len(seen) == 3
        assert 0.8 <= gaps[0] <= 1.2 and 1.6 <= gaps[1] <= 2.4

    async def test_overflow_is_never_retried(self, autojump_clock, models_dev):
        seen: list[float] = []
        client, http = make_client(models_dev, scripted_transport([OVERFLOW, OK], seen))
        async with http:
            events = await collect(client, ask())
        assert [e.kind for e in events] == ["context_overflow"]
        assert len(seen) == 1

    async def test_retry_after_beyond_limit_gives_up(self, autojump_clock, models_dev):
        seen: list[float] = []
        limited = (429, {"retry-after": "600"}, RATE_LIMITED[2])
        policy = RetryPolicy(max_retry_after=60.0)
        client, http = make_client(
            models_dev, scripted_transport([limited, OK], seen), retry=policy
        )
        async with http:
            events = await collect(client, ask())
        assert events[0].kind == "retryable" and events[0].retry_after == 600.0
        assert len(seen) == 1

    async def test_connection_reset_before_output_is_retried(self, autojump_clock, models_dev):
        seen: list[float] = []
        calls = 0

        async def handler(request):
            nonlocal calls
            calls += 1
            seen.append(trio.current_time())
            if calls == 1:
                raise httpx.ReadError("Connection reset by peer")
            return httpx.Response(200, content=HELLO)

        client, http = make_client(models_dev, httpx.MockTransport(handler))
        async with http:
            assert await collect(client, ask()) == HELLO_EVENTS
        assert calls == 2

    async def test_retry_is_reported(self, autojump_clock, models_dev):
        notes = []
        seen: list[float] = []
        client, http = make_client(
            models_dev,
            scripted_transport([RATE_LIMITED, OK], seen),
            on_retry=lambda attempt, delay, err: notes.append((attempt, delay, err.status)),
        )
        async with http:
            await collect(client, ask())
        assert notes == [(1, 2.0, 429)]


class TestRealServer:
    async def test_cancellation_mid_stream_closes_the_connection(self, server, http, models_dev):
        partial = HELLO.split(b"event: content_block_stop")[0]
        server.queue(Reply(chunks=[partial], hang=True))
        catalog = Catalog.from_models_dev(models_dev).with_config(
            {"provider": {"anthropic": {"options": {"baseURL": server.base_url}}}}
        )
        client = ProviderClient(catalog, Auth(env=ENV), http_client=http)
        got = []
        with trio.CancelScope() as scope:
            async for event in client.stream(ask()):
                got.append(event)
                if isinstance(event, TextDelta):
                    scope.cancel()
        assert scope.cancelled_caught
        assert got == HELLO_EVENTS[:3]
        with trio.fail_after(5):
            await server.disconnected.wait()
        assert server.disconnects == 1
        assert len(server.requests) == 1

    async def test_idle_stream_times_out_as_retryable(self, server, http, models_dev):
        server.queue(Reply(chunks=[HELLO[:40]], hang=True))
        catalog = Catalog.from_models_dev(models_dev).with_config(
            {"provider": {"anthropic": {"options": {"baseURL": server.base_url}}}}
        )
        client = ProviderClient(
            catalog,
            Auth(env=ENV),
            http_client=http,
            idle_timeout=0.2,
            retry=RetryPolicy(max_attempts=1),
        )
        events = [e async for e in client.stream(ask())]
        assert len(events) == 1 and events[0].kind == "retryable"
        with trio.fail_after(5):
            await server.disconnected.wait()

    async def test_http_429_then_success_against_real_server(self, server, http, models_dev):
        server.queue(
            Reply(
                status=429,
                headers=[("retry-after", "0.05")],
                json_body={"error": {"code": "rate_limit_exceeded", "message": "slow"}},
            ),
            Reply(chunks=[HELLO]),
        )
        catalog = Catalog.from_models_dev(models_dev).with_config(
            {"provider": {"anthropic": {"options": {"baseURL": server.base_url}}}}
        )
        client = ProviderClient(catalog, Auth(env=ENV), http_client=http)
        assert await collect(client, ask()) == HELLO_EVENTS
        assert len(server.requests) == 2

    async def test_provider_added_only_through_config(self, server, http, models_dev):
        chat = streams.sse(
            {
                "id": "c",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": "local"},
                        "finish_reason": None,
                    }
                ],
            },
            {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"id": "c", "choices": None, "usage": {"prompt_tokens": 5, "completion_tokens": 1}},
            done=True,
        )
        server.queue(Reply(chunks=[chat]))
        config = {
            "provider": {
                "lab": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Lab vLLM",
                    "options": {"baseURL": server.base_url + "/v1", "apiKey": "{env:LAB_KEY}"},
                    "models": {
                        "qwen3-coder": {
                            "name": "Qwen3 Coder",
                            "limit": {"context": 32768, "output": 4096},
                            "options": {
                                "temperature": 0.3,
                                "reasoningEffort": "low",
                                "body": {"chat_template_kwargs": {"enable_thinking": False}},
                            },
                        }
                    },
                }
            }
        }
        catalog = Catalog.from_models_dev(models_dev).with_config(config)
        client = ProviderClient(catalog, Auth(env={"LAB_KEY": "k-lab"}), http_client=http)
        events = [e async for e in client.stream(ask("lab", "qwen3-coder"))]
        assert events == [
            StepStart(),
            TextStart(id="text-0"),
            TextDelta(id="text-0", delta="local"),
            TextEnd(id="text-0"),
            StepFinish(finish_reason="stop", usage=Usage(input_tokens=5, output_tokens=1)),
        ]
        sent = server.requests[0]
        assert sent.path == "/v1/chat/completions"
        assert sent.headers["authorization"] == "Bearer k-lab"
        body = sent.json()
        assert body["model"] == "qwen3-coder"
        assert body["temperature"] == 0.3  # generation control from config
        assert body["reasoning_effort"] == "low"  # model request option from config
        assert body["chat_template_kwargs"] == {"enable_thinking": False}  # compatibility field


class TestRoutingFailures:
    async def test_missing_credentials_is_an_auth_error(self, models_dev):
        async with httpx.AsyncClient() as http:
            client = ProviderClient(
                Catalog.from_models_dev(models_dev), Auth(env={}), http_client=http
            )
            events = [e async for e in client.stream(ask())]
        assert len(events) == 1 and events[0].kind == "auth"
        assert "ANTHROPIC_API_KEY" in events[0].message

    async def test_unknown_model_is_terminal(self, models_dev):
        async with httpx.AsyncClient() as http:
            client = ProviderClient(
                Catalog.from_models_dev(models_dev), Auth(env=ENV), http_client=http
            )
            events = [e async for e in client.stream(ask(model="claude-nope"))]
        assert [(e.kind, e.code) for e in events] == [("terminal", "catalog")]
        # The failure lists what the provider has, newest first.
        assert events[0].message.startswith(
            "unknown model 'anthropic/claude-nope'; known models of provider anthropic: "
            "claude-sonnet-5, "
        )

    async def test_package_without_adapter_is_terminal(self, models_dev):
        model = next(iter(models_dev["amazon-bedrock"]["models"]))
        env = {"AWS_BEARER_TOKEN_BEDROCK": "t"}
        async with httpx.AsyncClient() as http:
            client = ProviderClient(
                Catalog.from_models_dev(models_dev), Auth(env=env), http_client=http
            )
            events = [e async for e in client.stream(ask("amazon-bedrock", model))]
        assert events[0].kind == "terminal" and "@ai-sdk/amazon-bedrock" in events[0].message


async def test_copilot_oauth_credential_reroutes_and_sets_initiator(models_dev, tmp_path):
    from runtime.llm import CredentialStore, OAuthCredential

    store = CredentialStore(tmp_path)
    store.set(
        "github-copilot",
        OAuthCredential(
            access="gho_x",
            base_url="https://copilot.example",
            headers={"openai-intent": "conversation-edits", "x-initiator": "user"},
        ),
    )
    async with httpx.AsyncClient() as http:
        client = ProviderClient(
            Catalog.from_models_dev(models_dev), Auth(env={}, store=store), http_client=http
        )
        model = next(iter(models_dev["github-copilot"]["models"]))
        prepared = await client.prepare(ask("github-copilot", model))
    assert prepared.wire.url == "https://copilot.example/chat/completions"
    assert prepared.wire.headers["authorization"] == "Bearer gho_x"
    assert prepared.wire.headers["x-initiator"] == "user"
    assert json.loads(prepared.wire.body)["model"] == model
