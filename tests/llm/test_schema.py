import msgspec
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import runtime.llm as llm
from runtime.llm import (
    AssistantMessage,
    FilePart,
    GenerationControls,
    LLMEvent,
    LLMRequest,
    Message,
    ModelRef,
    ProviderError,
    ReasoningPart,
    ScriptedLLM,
    ScriptExhaustedError,
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
    ToolMessage,
    ToolResultPart,
    Usage,
    UserMessage,
)

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
_obj = st.dictionaries(st.text(max_size=5), _json, max_size=3)
_meta = st.none() | _obj
_text = st.builds(TextPart, text=st.text(), provider_metadata=_meta)
_file = st.builds(
    FilePart,
    mime=st.sampled_from(["image/png", "application/pdf"]),
    url=st.text(),
    filename=st.none() | st.text(max_size=10),
)
_reasoning = st.builds(ReasoningPart, text=st.text(), provider_metadata=_meta)
_call = st.builds(
    ToolCallPart,
    call_id=st.text(min_size=1, max_size=8),
    name=st.text(max_size=8),
    input=_obj,
    provider_executed=st.booleans(),
    provider_metadata=_meta,
)
_result = st.builds(
    ToolResultPart,
    call_id=st.text(min_size=1, max_size=8),
    name=st.text(max_size=8),
    content=st.lists(_text | _file, max_size=3),
    is_error=st.booleans(),
    structured=_json,
    provider_executed=st.booleans(),
    provider_metadata=_meta,
)
_message = st.one_of(
    st.builds(SystemMessage, text=st.text()),
    st.builds(UserMessage, content=st.lists(_text | _file, max_size=3)),
    st.builds(AssistantMessage, content=st.lists(_text | _reasoning | _call | _result, max_size=4)),
    st.builds(ToolMessage, content=st.lists(_result, max_size=3)),
)
_request = st.builds(
    LLMRequest,
    model=st.builds(
        ModelRef,
        provider_id=st.text(max_size=8),
        model_id=st.text(max_size=8),
        variant=st.none() | st.text(max_size=5),
    ),
    system=st.lists(st.text(max_size=20), max_size=2),
    messages=st.lists(_message, max_size=5),
    tools=st.lists(
        st.builds(
            ToolDefinition,
            name=st.text(max_size=8),
            description=st.text(max_size=8),
            input_schema=_obj,
        ),
        max_size=2,
    ),
    tool_choice=st.sampled_from(["auto", "none", "required", "bash"]),
    generation=st.builds(
        GenerationControls,
        max_output_tokens=st.none() | st.integers(1, 100000),
        temperature=st.none() | st.floats(0, 2),
        top_p=st.none() | st.floats(0, 1),
        top_k=st.none() | st.integers(1, 100),
        stop=st.none() | st.lists(st.text(max_size=4), max_size=2),
    ),
    options=_obj,
    prompt_cache_key=st.none() | st.text(max_size=8),
)


@given(_request)
def test_request_round_trips_through_json(request: LLMRequest) -> None:
    assert msgspec.json.decode(msgspec.json.encode(request), type=LLMRequest) == request


@given(st.lists(_message, max_size=6))
def test_message_union_decodes_by_role(messages: list[Message]) -> None:
    raw = msgspec.json.encode(messages)
    assert msgspec.json.decode(raw, type=list[Message]) == messages


def test_tags_are_kebab_case_and_roles_are_plain() -> None:
    event = ToolCall(call_id="c1", name="bash", input={"cmd": "ls"})
    assert msgspec.json.decode(msgspec.json.encode(event))["type"] == "tool-call"
    err = ProviderError(kind="retryable", message="slow down", status=429, retry_after=2.0)
    assert msgspec.to_builtins(err)["type"] == "provider-error"
    assert msgspec.to_builtins(SystemMessage(text="x")) == {"role": "system", "text": "x"}
    part = ToolResultPart(call_id="c", name="n", content=[TextPart(text="t")], is_error=True)
    assert msgspec.to_builtins(part)["type"] == "tool-result"


def test_event_union_round_trips() -> None:
    events: list[LLMEvent] = [
        StepStart(),
        TextDelta(id="t", delta="hi"),
        ToolCall(call_id="c", name="x", input={}),
        StepFinish(finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=1)),
        ProviderError(kind="context_overflow", message="prompt is too long"),
    ]
    raw = msgspec.json.encode(events)
    assert msgspec.json.decode(raw, type=list[LLMEvent]) == events


def test_request_defaults_are_independent() -> None:
    a = LLMRequest(model=ModelRef(provider_id="p", model_id="m"), system=[], messages=[])
    b = LLMRequest(model=ModelRef(provider_id="p", model_id="m"), system=[], messages=[])
    a.tools.append(ToolDefinition(name="x", description="", input_schema={}))
    assert b.tools == []
    assert a.tool_choice == "auto" and a.generation == GenerationControls()


def test_exports_are_sorted_and_complete() -> None:
    assert llm.__all__ == sorted(llm.__all__)
    public = {n for n in dir(llm) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(llm.__all__)


def _req(text: str) -> LLMRequest:
    return LLMRequest(
        model=ModelRef(provider_id="p", model_id="m"),
        system=["be brief"],
        messages=[UserMessage(content=[TextPart(text=text)])],
    )


async def test_scripted_llm_replays_in_order_and_records_requests() -> None:
    client = ScriptedLLM(
        [[StepStart(), TextDelta(id="1", delta="a")], [TextDelta(id="2", delta="b")]]
    )
    first = [e async for e in client.stream(_req("one"))]
    second = [e async for e in client.stream(_req("two"))]
    assert first == [StepStart(), TextDelta(id="1", delta="a")]
    assert second == [TextDelta(id="2", delta="b")]
    assert [r.messages[0] for r in client.requests] == [
        UserMessage(content=[TextPart(text="one")]),
        UserMessage(content=[TextPart(text="two")]),
    ]
    with pytest.raises(ScriptExhaustedError, match="2 script"):
        async for _ in client.stream(_req("three")):
            pass
    assert len(client.requests) == 3


async def test_scripted_llm_computes_script_from_request() -> None:
    def echo(request: LLMRequest) -> list[LLMEvent]:
        part = request.messages[-1].content[0]
        assert isinstance(part, TextPart)
        return [TextDelta(id="e", delta=part.text.upper())]

    client = ScriptedLLM(echo)
    assert [e async for e in client.stream(_req("hey"))] == [TextDelta(id="e", delta="HEY")]


async def test_scripted_llm_latency_uses_trio_time(autojump_clock: trio.abc.Clock) -> None:
    client = ScriptedLLM([[StepStart()]], latency=5.0)
    start = trio.current_time()
    events = [e async for e in client.stream(_req("x"))]
    assert events == [StepStart()]
    assert trio.current_time() - start == pytest.approx(5.0)


async def test_scripted_llm_is_cancellable_during_latency(autojump_clock: trio.abc.Clock) -> None:
    client = ScriptedLLM([[StepStart()]], latency=100.0)
    with trio.move_on_after(1) as scope:
        async for _ in client.stream(_req("x")):
            raise AssertionError("no event expected before the latency elapses")
    assert scope.cancelled_caught


@pytest.mark.parametrize("event_checkpoints", [True, False])
async def test_scripted_llm_event_checkpoints(event_checkpoints: bool) -> None:
    """With ``event_checkpoints`` a cancellation lands between events; without, a
    script arrives whole after its one latency sleep."""
    script = [StepStart(), TextStart(id="t"), TextDelta(id="t", delta="x"), TextEnd(id="t")]
    client = ScriptedLLM([script], event_checkpoints=event_checkpoints)
    seen: list[LLMEvent] = []
    with trio.CancelScope() as scope:
        async for event in client.stream(_req("x")):
            seen.append(event)
            scope.cancel()
    assert seen == (script[:1] if event_checkpoints else script)
