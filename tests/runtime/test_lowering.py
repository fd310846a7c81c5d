"""Lowering refuses a history no provider accepts, and sends no empty assistant message."""

from __future__ import annotations

import msgspec
import pytest

from runtime import events as ev
from runtime import llm
from runtime import messages as m
from runtime.history import HistoryDelta, HistoryView, UnansweredToolCallError, lower_history
from runtime.llm import Route
from runtime.llm._openai_chat import encode_chat

MODEL = ev.ModelRef(id="a", provider_id="p")
OTHER = ev.ModelRef(id="b", provider_id="p")
TIME = m.MessageTime(created=1)
USER = m.UserMessage(id="u1", time=TIME, text="hi")


def _tool(state: m.ToolState, call_id: str = "c1") -> m.AssistantTool:
    return m.AssistantTool(id=call_id, name="shell", state=state, time=m.ToolTime(created=1))


def _assistant(*content: m.AssistantContent, model: ev.ModelRef = MODEL) -> m.AssistantMessage:
    return m.AssistantMessage(id="a1", time=TIME, agent="build", model=model, content=list(content))


RUNNING = _tool(m.ToolRunning(input={"command": "sleep 30"}))
FAILED = _tool(
    m.ToolError(
        input={"command": "sleep 30"}, content=[], structured={},
        error=ev.SessionError(message="Tool execution interrupted"),
    )
)  # fmt: skip


def test_a_tool_call_without_its_result_is_refused() -> None:
    with pytest.raises(UnansweredToolCallError) as raised:
        lower_history([USER, _assistant(m.AssistantText(id="t", text="ok"), RUNNING)], MODEL)
    assert raised.value.call_id == "c1" and raised.value.message_id == "a1"
    assert "c1" in str(raised.value) and "without a result" in str(raised.value)


def test_the_history_view_refuses_it_too_and_lowers_once_the_call_is_answered() -> None:
    view = HistoryView()
    view.apply(HistoryDelta(0, 1, True, [(1, USER), (2, _assistant(RUNNING))]))
    with pytest.raises(UnansweredToolCallError):
        view.lowered(MODEL, None)
    view.apply(HistoryDelta(0, 2, False, [(2, _assistant(FAILED))]))
    lowered = view.lowered(MODEL, None)
    assert [type(x).__name__ for x in lowered] == ["UserMessage", "AssistantMessage", "ToolMessage"]
    result = lowered[2]
    assert isinstance(result, llm.ToolMessage) and result.content[0].is_error


def test_a_tool_still_streaming_its_input_is_not_sent() -> None:
    pending = _tool(m.ToolPending(input='{"comm'))
    lowered = lower_history([USER, _assistant(m.AssistantText(id="t", text="x"), pending)], MODEL)
    assert lowered[1] == llm.AssistantMessage(content=[llm.TextPart(text="x")])
    assert len(lowered) == 2


def test_empty_text_is_left_out_and_an_assistant_message_left_empty_is_omitted() -> None:
    empty = _assistant(m.AssistantText(id="t", text=""))
    assert lower_history([USER, empty], MODEL) == lower_history([USER], MODEL)
    mixed = _assistant(m.AssistantText(id="t", text=""), m.AssistantText(id="t2", text="kept"))
    assert lower_history([mixed], MODEL) == [
        llm.AssistantMessage(content=[llm.TextPart(text="kept")])
    ]


def test_reasoning_is_kept_when_it_carries_something_for_the_model() -> None:
    signed = m.AssistantReasoning(id="r", text="", provider_metadata={"anthropic": {"sig": "s"}})
    plain = m.AssistantReasoning(id="r2", text="")
    same = lower_history([_assistant(signed, plain)], MODEL)
    assert same == [
        llm.AssistantMessage(
            content=[llm.ReasoningPart(text="", provider_metadata={"anthropic": {"sig": "s"}})]
        )
    ]
    assert lower_history([_assistant(signed, plain)], OTHER) == []


def test_openai_chat_sends_no_assistant_message_it_cannot_carry() -> None:
    route = Route(protocol="openai-chat", base_url="http://x", model_id="m")
    request = llm.LLMRequest(
        model=llm.ModelRef(provider_id="p", model_id="m"), system=[],
        messages=[
            llm.UserMessage(content=[llm.TextPart(text="hi")]),
            llm.AssistantMessage(content=[llm.ReasoningPart(text="thought")]),
            llm.UserMessage(content=[llm.TextPart(text="again")]),
        ],
    )  # fmt: skip
    body = msgspec.json.decode(encode_chat(request, route).body)
    assert [message["role"] for message in body["messages"]] == ["user", "user"]
