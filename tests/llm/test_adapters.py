"""Each protocol adapter against a real local HTTP server."""

import json

import httpx
import msgspec
import pytest

from runtime.llm import (
    ADAPTERS,
    MAX_PROMPT_CACHE_KEY,
    AssistantMessage,
    Auth,
    Catalog,
    GenerationControls,
    LLMRequest,
    LoweringCache,
    ModelRef,
    ProviderClient,
    ProviderError,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningPart,
    ReasoningStart,
    RetryPolicy,
    Route,
    StepFinish,
    StepStart,
    SystemMessage,
    TextDelta,
    TextEnd,
    TextPart,
    TextStart,
    ToolCall,
    ToolCallPart,
    ToolDefinition,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    ToolMessage,
    ToolResultPart,
    Usage,
    UserMessage,
    prompt_cache_key,
)

from . import streams
from .conftest import Reply

ENV = {
    "OPENAI_API_KEY": "sk-openai",
    "ANTHROPIC_API_KEY": "sk-ant",
    "GEMINI_API_KEY": "g-key",
    "DEEPSEEK_API_KEY": "sk-ds",
}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
TOOL = ToolDefinition(name="get_weather", description="Weather by city", input_schema=SCHEMA)
REASONING_META = {
    "anthropic": {"signature": "sig-1"},
    "openai": {"item_id": "rs_9", "encrypted_content": "enc-9"},
    "google": {"thoughtSignature": "gsig"},
}
EPH = {"type": "ephemeral"}
WRAPPED = "<system-update>\nDate is now 2026-07-03 &amp; &lt;b&gt;\n</system-update>"


def conversation(provider: str, model: str) -> LLMRequest:
    return LLMRequest(
        model=ModelRef(provider_id=provider, model_id=model),
        system=["You are terse."],
        messages=[
            UserMessage(content=[TextPart(text="Weather in Paris?")]),
            AssistantMessage(
                content=[
                    ReasoningPart(text="Need a tool.", provider_metadata=REASONING_META),
                    TextPart(text="Checking."),
                    ToolCallPart(
                        call_id="call_1",
                        name="get_weather",
                        input={"city": "Paris"},
                        provider_metadata={"google": {"thoughtSignature": "gsig-call"}},
                    ),
                ]
            ),
            ToolMessage(
                content=[
                    ToolResultPart(
                        call_id="call_1",
                        name="get_weather",
                        content=[TextPart(text="city not found")],
                        is_error=True,
                        structured={"code": 404},
                    )
                ]
            ),
            SystemMessage(text="Date is now 2026-07-03 & <b>"),
        ],
        tools=[TOOL],
        generation=GenerationControls(max_output_tokens=1000, temperature=0.2),
        prompt_cache_key="ses_1",
    )


def client_for(models_dev, server, http, provider, **kwargs) -> ProviderClient:
    config = {"provider": {provider: {"options": {"baseURL": server.base_url + "/v1"}}}}
    catalog = Catalog.from_models_dev(models_dev).with_config(config)
    kwargs.setdefault("retry", RetryPolicy(max_attempts=1))
    return ProviderClient(catalog, Auth(env=ENV), http_client=http, **kwargs)


async def run(client: ProviderClient, request: LLMRequest) -> list:
    return [e async for e in client.stream(request)]


def without_cost(events: list) -> list:
    return [
        msgspec.structs.replace(e, cost=None) if isinstance(e, StepFinish) else e for e in events
    ]


class TestOpenAIChat:
    async def test_reasoning_text_parallel_tool_calls_and_usage(self, server, http, models_dev):
        server.queue(Reply(chunks=[streams.CHAT_TOOLS]))
        client = client_for(models_dev, server, http, "deepseek")
        events = await run(client, conversation("deepseek", "deepseek-reasoner"))
        assert without_cost(events) == [
            StepStart(),
            ReasoningStart(id="reasoning-0"),
            ReasoningDelta(id="reasoning-0", delta="User wants"),
            ReasoningDelta(id="reasoning-0", delta=" weather."),
            ReasoningEnd(id="reasoning-0"),
            TextStart(id="text-1"),
            TextDelta(id="text-1", delta="Checking"),
            TextDelta(id="text-1", delta=" now."),
            ToolInputStart(call_id="call_A", name="get_weather"),
            ToolInputDelta(call_id="call_A", delta='{"ci'),
            ToolInputStart(call_id="call_B", name="get_time"),
            ToolInputDelta(call_id="call_A", delta='ty": "Paris"}'),
            ToolInputDelta(call_id="call_B", delta='{"tz": "CET"}'),
            TextEnd(id="text-1"),
            ToolInputEnd(call_id="call_A"),
            ToolCall(call_id="call_A", name="get_weather", input={"city": "Paris"}),
            ToolInputEnd(call_id="call_B"),
            ToolCall(call_id="call_B", name="get_time", input={"tz": "CET"}),
            StepFinish(
                finish_reason="tool-calls",
                usage=Usage(
                    input_tokens=12, output_tokens=300, reasoning_tokens=120, cache_read_tokens=4
                ),
            ),
        ]
        assert events[-1].cost is not None and events[-1].cost > 0

    async def test_request_shape(self, server, http, models_dev):
        server.queue(Reply(chunks=[streams.CHAT_TOOLS]))
        client = client_for(models_dev, server, http, "deepseek")
        request = conversation("deepseek", "deepseek-reasoner")
        await run(client, request)
        sent = server.requests[0]
        assert sent.method == "POST" and sent.path == "/v1/chat/completions"
        assert sent.headers["authorization"] == "Bearer sk-ds"
        assert sent.json() == {
            "model": "deepseek-reasoner",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": "Checking.",
                    "reasoning_content": "Need a tool.",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_1",
                    "content": '{"error":"city not found","structured":{"code":404}}',
                },
                {"role": "system", "content": "Date is now 2026-07-03 & <b>"},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Weather by city",
                        "parameters": SCHEMA,
                    },
                }
            ],
            "tool_choice": "auto",
            "max_tokens": 1000,
            "temperature": 0.2,
            "prompt_cache_key": "ses_1",
        }
        assert sent.body == (await client.prepare(request)).wire.body

    async def test_error_mid_stream_is_classified_and_not_retried(self, server, http, models_dev):
        server.queue(
            Reply(chunks=[streams.CHAT_ERROR_MIDSTREAM]), Reply(chunks=[streams.CHAT_TOOLS])
        )
        client = client_for(models_dev, server, http, "deepseek", retry=RetryPolicy(max_attempts=3))
        events = await run(client, conversation("deepseek", "deepseek-reasoner"))
        assert events == [
            StepStart(),
            TextStart(id="text-0"),
            TextDelta(id="text-0", delta="Par"),
            ProviderError(
                kind="retryable",
                message="The server had an error while processing your request.",
                code="server_error",
            ),
        ]
        assert len(server.requests) == 1


class TestOpenAIResponses:
    async def test_encrypted_reasoning_function_call_text(self, server, http, models_dev):
        server.queue(Reply(chunks=[streams.RESPONSES]))
        client = client_for(models_dev, server, http, "openai")
        events = await run(client, conversation("openai", "gpt-4.1"))
        start_md = {"openai": {"item_id": "rs_1", "encrypted_content": "gAAAA-start"}}
        final_md = {"openai": {"item_id": "rs_1", "encrypted_content": "gAAAA-final"}}
        assert without_cost(events) == [
            StepStart(),
            ReasoningStart(id="rs_1", provider_metadata=start_md),
            ReasoningDelta(id="rs_1", delta="**Calcul"),
            ReasoningDelta(id="rs_1", delta="ating**"),
            ReasoningEnd(id="rs_1", provider_metadata=final_md),
            ToolInputStart(call_id="call_AB6", name="calculator"),
            ToolInputDelta(call_id="call_AB6", delta='{"'),
            ToolInputDelta(call_id="call_AB6", delta='a":12,"b":7,"op":"add"}'),
            ToolInputEnd(call_id="call_AB6"),
            ToolCall(
                call_id="call_AB6",
                name="calculator",
                input={"a": 12, "b": 7, "op": "add"},
                provider_metadata={"openai": {"item_id": "fc_1"}},
            ),
            TextStart(id="msg_1"),
            TextDelta(id="msg_1", delta="The"),
            TextDelta(id="msg_1", delta=" sum"),
            TextEnd(id="msg_1", provider_metadata={"openai": {"item_id": "msg_1"}}),
            StepFinish(
                finish_reason="tool-calls",
                usage=Usage(
                    input_tokens=199, output_tokens=12, reasoning_tokens=5, cache_read_tokens=100
                ),
                provider_metadata={"openai": {"response_id": "resp_1"}},
            ),
        ]

    async def test_request_shape(self, server, http, models_dev):
        server.queue(Reply(chunks=[streams.RESPONSES]))
        client = client_for(models_dev, server, http, "openai")
        request = conversation("openai", "gpt-4.1")
        await run(client, request)
        sent = server.requests[0]
        assert sent.path == "/v1/responses"
        assert sent.headers["authorization"] == "Bearer sk-openai"
        assert sent.json() == {
            "model": "gpt-4.1",
            "instructions": "You are terse.",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
                {
                    "type": "reasoning",
                    "id": "rs_9",
                    "encrypted_content": "enc-9",
                    "summary": [{"type": "summary_text", "text": "Need a tool."}],
                },
                {"role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city":"Paris"}',
                },
                {
                    "type": "function_call_output",
                    "call_id": "call_1",
                    "output": '{"error":"city not found","structured":{"code":404}}',
                },
                {"role": "system", "content": "Date is now 2026-07-03 & <b>"},
            ],
            "stream": True,
            "store": False,
            "tools": [
                {
                    "type": "function",
                    "name": "get_weather",
                    "description": "Weather by city",
                    "parameters": SCHEMA,
                    "strict": False,
                }
            ],
            "tool_choice": "auto",
            "max_output_tokens": 1000,
            "temperature": 0.2,
            "prompt_cache_key": "ses_1",
        }
        assert sent.body == (await client.prepare(request)).wire.body

    async def test_reasoning_model_requests_encrypted_content(self, server, http, models_dev):
        client = client_for(models_dev, server, http, "openai")
        request = msgspec.structs.replace(
            conversation("openai", "gpt-5"), options={"reasoning_effort": "high"}
        )
        body = json.loads((await client.prepare(request)).wire.body)
        assert body["include"] == ["reasoning.encrypted_content"]
        assert body["reasoning"] == {"effort": "high"}
        assert "temperature" not in body  # the catalog says gpt-5 takes no temperature

    async def test_quota_error_in_stream_is_terminal(self, server, http, models_dev):
        server.queue(
            Reply(chunks=[streams.RESPONSES_QUOTA_ERROR]), Reply(chunks=[streams.RESPONSES])
        )
        client = client_for(models_dev, server, http, "openai", retry=RetryPolicy(max_attempts=3))
        events = await run(client, conversation("openai", "gpt-4.1"))
        assert len(events) == 1
        assert isinstance(events[0], ProviderError) and events[0].kind == "terminal"
        assert events[0].code == "insufficient_quota"
        assert len(server.requests) == 1


class TestAnthropic:
    async def test_thinking_signature_text_interleaved_tool_input(self, server, http, models_dev):
        server.queue(Reply(chunks=[streams.ANTHROPIC]))
        client = client_for(models_dev, server, http, "anthropic")
        events = await run(client, conversation("anthropic", "claude-sonnet-4-5"))
        assert without_cost(events) == [
            StepStart(),
            ReasoningStart(id="0"),
            ReasoningDelta(id="0", delta="The previous"),
            ReasoningDelta(id="0", delta=" result"),
            ReasoningEnd(id="0", provider_metadata={"anthropic": {"signature": "EvQBCkYI"}}),
            TextStart(id="1"),
            TextDelta(id="1", delta="925"),
            TextEnd(id="1"),
            ToolInputStart(call_id="toolu_01", name="json"),
            ToolInputDelta(call_id="toolu_01", delta='{"elements": '),
            ToolInputStart(call_id="toolu_02", name="noop"),
            ToolInputDelta(call_id="toolu_01", delta="[1, 2]}"),
            ToolInputEnd(call_id="toolu_02"),
            ToolCall(call_id="toolu_02", name="noop", input={}),
            ToolInputEnd(call_id="toolu_01"),
            ToolCall(call_id="toolu_01", name="json", input={"elements": [1, 2]}),
            StepFinish(
                finish_reason="tool-calls",
                usage=Usage(
                    input_tokens=849, output_tokens=47, cache_read_tokens=20, cache_write_tokens=10
                ),
            ),
        ]
        # 849 * 3 + 47 * 15 + 20 * 0.3 + 10 * 3.75 per million
        assert events[-1].cost == pytest.approx((849 * 3 + 47 * 15 + 20 * 0.3 + 10 * 3.75) / 1e6)

    async def test_request_shape_with_wrapped_system_update_and_cache(
        self, server, http, models_dev
    ):
        server.queue(Reply(chunks=[streams.ANTHROPIC]))
        client = client_for(models_dev, server, http, "anthropic")
        request = conversation("anthropic", "claude-sonnet-4-5")
        await run(client, request)
        sent = server.requests[0]
        assert sent.path == "/v1/messages"
        assert sent.headers["x-api-key"] == "sk-ant"
        assert sent.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in sent.headers
        assert sent.json() == {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1000,
            "system": [{"type": "text", "text": "You are terse.", "cache_control": EPH}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Need a tool.", "signature": "sig-1"},
                        {"type": "text", "text": "Checking."},
                        {
                            "type": "tool_use",
                            "id": "call_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                            "cache_control": EPH,
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "call_1",
                            "content": 'city not found\n{"code":404}',
                            "is_error": True,
                        },
                        {"type": "text", "text": WRAPPED, "cache_control": EPH},
                    ],
                },
            ],
            "tools": [
                {
                    "name": "get_weather",
                    "description": "Weather by city",
                    "input_schema": SCHEMA,
                    "cache_control": EPH,
                }
            ],
            "tool_choice": {"type": "auto"},
            "temperature": 0.2,
            "stream": True,
        }
        assert sent.body == (await client.prepare(request)).wire.body

    async def test_native_system_role_only_where_placement_allows(self, server, http, models_dev):
        client = client_for(models_dev, server, http, "anthropic")
        base = conversation("anthropic", "claude-opus-4-8")
        body = json.loads((await client.prepare(base)).wire.body)
        assert body["messages"][-1] == {
            "role": "system",
            "content": [
                {"type": "text", "text": "Date is now 2026-07-03 & <b>", "cache_control": EPH}
            ],
        }
        assert "temperature" not in body
        followed = msgspec.structs.replace(
            base, messages=[*base.messages, UserMessage(content=[TextPart(text="and now?")])]
        )
        body = json.loads((await client.prepare(followed)).wire.body)
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert body["messages"][-1]["content"][1]["text"] == WRAPPED
        first = msgspec.structs.replace(base, messages=[SystemMessage(text="x")])
        body = json.loads((await client.prepare(first)).wire.body)
        assert body["messages"][0]["role"] == "user"

    async def test_overloaded_mid_stream_after_output_is_not_retried(
        self, server, http, models_dev
    ):
        server.queue(
            Reply(chunks=[streams.ANTHROPIC_OVERLOADED_MIDSTREAM]),
            Reply(chunks=[streams.ANTHROPIC]),
        )
        client = client_for(
            models_dev, server, http, "anthropic", retry=RetryPolicy(max_attempts=3)
        )
        events = await run(client, conversation("anthropic", "claude-sonnet-4-5"))
        assert events[-1] == ProviderError(
            kind="retryable", message="overloaded_error: Overloaded", code="overloaded_error"
        )
        assert events[:3] == [StepStart(), TextStart(id="0"), TextDelta(id="0", delta="Hel")]
        assert len(server.requests) == 1


class TestGemini:
    async def test_thoughts_text_parallel_whole_function_calls(self, server, http, models_dev):
        server.queue(Reply(chunks=[streams.GEMINI]))
        client = client_for(models_dev, server, http, "google")
        events = await run(client, conversation("google", "gemini-2.5-flash"))
        assert without_cost(events) == [
            StepStart(),
            ReasoningStart(id="reasoning-0"),
            ReasoningDelta(id="reasoning-0", delta="Weighing options"),
            ReasoningEnd(id="reasoning-0"),
            TextStart(id="text-1"),
            TextDelta(id="text-1", delta="Let me check"),
            TextEnd(id="text-1"),
            ToolInputStart(call_id="gemini-call-0", name="weather"),
            ToolInputDelta(call_id="gemini-call-0", delta='{"location":"San Francisco"}'),
            ToolInputEnd(call_id="gemini-call-0"),
            ToolCall(
                call_id="gemini-call-0",
                name="weather",
                input={"location": "San Francisco"},
                provider_metadata={"google": {"thoughtSignature": "EpEgCo4g"}},
            ),
            ToolInputStart(call_id="gemini-call-1", name="weather"),
            ToolInputDelta(call_id="gemini-call-1", delta='{"location":"Boston"}'),
            ToolInputEnd(call_id="gemini-call-1"),
            ToolCall(call_id="gemini-call-1", name="weather", input={"location": "Boston"}),
            StepFinish(
                finish_reason="tool-calls",
                usage=Usage(
                    input_tokens=20, output_tokens=819, reasoning_tokens=804, cache_read_tokens=9
                ),
            ),
        ]

    async def test_signature_on_empty_text_part_lands_on_text_end(self, server, http, models_dev):
        server.queue(Reply(chunks=[streams.GEMINI_TEXT_SIGNATURE]))
        client = client_for(models_dev, server, http, "google")
        events = await run(client, conversation("google", "gemini-2.5-flash"))
        assert events[1:4] == [
            TextStart(id="text-0"),
            TextDelta(id="text-0", delta="Hi"),
            TextEnd(id="text-0", provider_metadata={"google": {"thoughtSignature": "EpAICo0I"}}),
        ]
        assert isinstance(events[4], StepFinish) and events[4].finish_reason == "stop"

    async def test_request_shape(self, server, http, models_dev):
        server.queue(Reply(chunks=[streams.GEMINI]))
        client = client_for(models_dev, server, http, "google")
        request = conversation("google", "gemini-2.5-flash")
        await run(client, request)
        sent = server.requests[0]
        assert sent.path == "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        assert sent.headers["x-goog-api-key"] == "g-key"
        gemini_schema = {k: v for k, v in SCHEMA.items() if k != "additionalProperties"}
        assert sent.json() == {
            "contents": [
                {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
                {
                    "role": "model",
                    "parts": [
                        {"text": "Need a tool.", "thought": True, "thoughtSignature": "gsig"},
                        {"text": "Checking."},
                        {
                            "functionCall": {
                                "name": "get_weather",
                                "args": {"city": "Paris"},
                                "id": "call_1",
                            },
                            "thoughtSignature": "gsig-call",
                        },
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {
                            "functionResponse": {
                                "name": "get_weather",
                                "id": "call_1",
                                "response": {
                                    "error": "city not found",
                                    "structured": {"code": 404},
                                },
                            }
                        },
                        {"text": WRAPPED},
                    ],
                },
            ],
            "systemInstruction": {"parts": [{"text": "You are terse."}]},
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "get_weather",
                            "description": "Weather by city",
                            "parameters": gemini_schema,
                        }
                    ]
                }
            ],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
            "generationConfig": {"maxOutputTokens": 1000, "temperature": 0.2},
        }
        assert sent.body == (await client.prepare(request)).wire.body


async def test_encoding_is_byte_stable_across_clients(models_dev):
    catalog = Catalog.from_models_dev(models_dev)
    bodies = set()
    for _ in range(3):
        async with httpx.AsyncClient() as http:
            client = ProviderClient(catalog, Auth(env=ENV), http_client=http)
            bodies.add(
                (await client.prepare(conversation("anthropic", "claude-sonnet-4-5"))).wire.body
            )
    assert len(bodies) == 1


def _route(protocol: str, **fields) -> Route:
    return Route(protocol=protocol, base_url="http://x/v1", model_id="m", **fields)


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses"])
def test_lowering_cache_gives_the_same_bytes_and_lowers_each_message_once(protocol):
    encode = ADAPTERS[protocol].encode
    request = conversation("openai", "gpt-5")
    store = {"store": True} if protocol == "openai-responses" else {}
    route = _route(protocol, reasoning_field="reasoning_content")
    cache = LoweringCache(64)
    first = encode(request, route, cache=cache)
    assert first == encode(request, route)  # the cache changes nothing on the wire
    # Chat Completions also keeps each tool definition, encoded, whatever the route.
    tools = len(request.tools) if protocol == "openai-chat" else 0
    assert len(cache) == len(request.messages) + tools
    longer = msgspec.structs.replace(
        request, messages=[*request.messages, UserMessage(content=[TextPart(text="more")])]
    )
    assert encode(longer, route, cache=cache) == encode(longer, route)
    assert len(cache) == len(request.messages) + 1 + tools  # history not lowered again
    assert encode(request, route, cache=cache) == first  # cached shapes were not mutated
    if store:
        stored = msgspec.structs.replace(request, options=store)
        assert encode(stored, route, cache=cache) == encode(stored, route)
    else:
        other = _route(protocol, reasoning_field=None)
        assert encode(request, other, cache=cache) == encode(request, other)
    assert len(cache) == 2 * len(request.messages) + 1 + tools  # one entry per variant


def test_lowering_cache_is_bounded_least_recently_used_first():
    cache = LoweringCache(2)
    a, b, c = (UserMessage(content=[TextPart(text=t)]) for t in "abc")
    built: list[str] = []

    def build(message: UserMessage) -> str:
        built.append(message.content[0].text)
        return message.content[0].text.upper()

    assert [cache.lower(m, None, build) for m in (a, b, a, c, a, b)] == list("ABACAB")
    assert built == ["a", "b", "c", "b"]  # b was evicted by c (a was used more recently)
    assert len(cache) == 2
    assert LoweringCache(0).lower(a, None, build) == "A" and len(LoweringCache(0)) == 0
    with pytest.raises(ValueError):
        LoweringCache(-1)


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses"])
def test_prompt_cache_keys_never_exceed_the_providers_limit(protocol):
    hex_id = "ses_" + "0123456789abcdef" * 4
    long_id = "ses_" + "Z" * 80
    sent = {}
    for key in ("ses_1", hex_id, long_id, "k" * MAX_PROMPT_CACHE_KEY):
        request = msgspec.structs.replace(conversation("openai", "gpt-5"), prompt_cache_key=key)
        body = json.loads(ADAPTERS[protocol].encode(request, _route(protocol)).body)
        sent[key] = body["prompt_cache_key"]
    assert sent["ses_1"] == "ses_1"
    assert sent[hex_id] == hex_id.removeprefix("ses_")  # OpenCode's shape for external ids
    assert len(sent[long_id]) == MAX_PROMPT_CACHE_KEY == 64
    assert sent[long_id] == prompt_cache_key(long_id)  # the same key every time
    assert sent["k" * 64] == "k" * 64
