"""Scripted events replayed through every real adapter over a mock transport."""

import httpx
import msgspec
import pytest

from runtime.llm import (
    Auth,
    Catalog,
    LLMRequest,
    ModelRef,
    ProviderClient,
    ProviderError,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RetryPolicy,
    ScriptedLLM,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextPart,
    TextStart,
    ToolCall,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
    UserMessage,
    render_stream,
)

MODELS = {
    "openai-chat": ("deepseek", "deepseek-reasoner"),
    "openai-responses": ("openai", "gpt-5"),
    "anthropic-messages": ("anthropic", "claude-sonnet-4-5"),
    "gemini": ("google", "gemini-2.5-flash"),
}
ENV = {
    "DEEPSEEK_API_KEY": "a",
    "OPENAI_API_KEY": "b",
    "ANTHROPIC_API_KEY": "c",
    "GEMINI_API_KEY": "d",
}
SIG = {
    "anthropic": {"signature": "sig"},
    "google": {"thoughtSignature": "sig"},
    "openai": {"encrypted_content": "enc"},
}
SCRIPT = [
    StepStart(),
    ReasoningStart(id="r1", provider_metadata=SIG),
    ReasoningDelta(id="r1", delta="thinking"),
    ReasoningEnd(id="r1", provider_metadata=SIG),
    TextStart(id="t1"),
    TextDelta(id="t1", delta="Hello "),
    TextDelta(id="t1", delta="world"),
    TextEnd(id="t1"),
    ToolInputStart(call_id="call_1", name="read"),
    ToolInputDelta(call_id="call_1", delta='{"filePath":'),
    ToolInputDelta(call_id="call_1", delta='"a.txt"}'),
    ToolInputEnd(call_id="call_1"),
    ToolCall(call_id="call_1", name="read", input={"filePath": "a.txt"}),
    ToolCall(call_id="call_2", name="ls", input={}),
    StepFinish(
        finish_reason="tool-calls",
        usage=Usage(input_tokens=10, output_tokens=5, reasoning_tokens=2, cache_read_tokens=3),
    ),
]


def summary(events):
    text = "".join(e.delta for e in events if isinstance(e, TextDelta))
    reasoning = "".join(e.delta for e in events if isinstance(e, ReasoningDelta))
    calls = [(e.call_id, e.name, e.input) for e in events if isinstance(e, ToolCall)]
    finish = [(e.finish_reason, e.usage) for e in events if isinstance(e, StepFinish)]
    errors = [(e.kind, e.message) for e in events if isinstance(e, ProviderError)]
    return text, reasoning, calls, finish, errors


@pytest.mark.parametrize("protocol", sorted(MODELS))
async def test_script_survives_each_adapter(protocol, models_dev):
    provider, model = MODELS[protocol]
    scripted = ScriptedLLM(
        [
            SCRIPT,
            [
                StepStart(),
                ProviderError(
                    kind="context_overflow",
                    message="prompt is too long: 9 tokens > 8 maximum",
                    code="invalid_request_error",
                ),
            ],
        ]
    )
    transport, seen = scripted.replay_transport(protocol)
    async with httpx.AsyncClient(transport=transport) as http:
        client = ProviderClient(
            Catalog.from_models_dev(models_dev),
            Auth(env=ENV),
            http_client=http,
            retry=RetryPolicy(max_attempts=1),
        )
        request = LLMRequest(
            model=ModelRef(provider_id=provider, model_id=model),
            system=[],
            messages=[UserMessage(content=[TextPart(text="go")])],
        )
        first = [e async for e in client.stream(request)]
        second = [e async for e in client.stream(request)]
    calls = [("call_1", "read", {"filePath": "a.txt"}), ("call_2", "ls", {})]
    usage = SCRIPT[-1].usage
    if protocol == "anthropic-messages":  # Messages usage has no separate reasoning count
        usage = msgspec.structs.replace(usage, reasoning_tokens=0)
    assert summary(first) == (
        "Hello world",
        "thinking",
        calls,
        [("tool-calls", usage)],
        [],
    )
    assert first[0] == StepStart()
    assert summary(second)[4][0][0] == "context_overflow"
    assert len(seen) == 2


def test_render_is_deterministic():
    assert render_stream(SCRIPT, "anthropic-messages") == render_stream(
        SCRIPT, "anthropic-messages"
    )


def test_replay_transport_needs_sequence_scripts():
    with pytest.raises(TypeError):
        ScriptedLLM(lambda r: []).replay_transport("gemini")
