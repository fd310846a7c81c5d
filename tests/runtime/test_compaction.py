"""Compaction's pure parts: the planner's compaction decisions, the checkpoint range, the
recent context, the summary request's bound and pruning."""

from __future__ import annotations

import pytest

from runtime import llm
from runtime import messages as m
from runtime._messages import ToolProviderInfo
from runtime.compaction import (
    CompactionSettings,
    RequestChars,
    UsageMark,
    estimate_request,
    over_budget,
    plan_checkpoint,
    prune_calls,
    recent_context,
    request_chars,
    summary_request,
)
from runtime.drain import (
    Compact,
    Compacted,
    Idle,
    Open,
    OverBudget,
    Promoted,
    RequestTurn,
    TurnEnded,
    begin_drain,
    plan,
)
from runtime.events import ModelRef, ToolTextContent
from runtime.history import (
    PRUNED_RESULT,
    HistoryDelta,
    HistoryView,
    lower_message,
    visible_history,
)

MODEL = ModelRef(id="m", provider_id="p")
TIME = m.MessageTime(created=1)


def _turn(step: int = 1) -> tuple:
    state, _ = plan(begin_drain(force=False)[0], Promoted(count=1, max_turns=10))
    return state, RequestTurn(step=step, max_turns=10)


def test_an_over_budget_turn_compacts_once_then_runs() -> None:
    state, turn = _turn()
    state, effect = plan(state, OverBudget())
    assert effect == Compact(reason="auto")
    state, effect = plan(state, Compacted(completed=True))
    assert effect == RequestTurn(step=1, max_turns=10, compacted=True)
    with pytest.raises(ValueError):
        plan(state, OverBudget())  # a compacted turn is never over budget again
    # A compaction with nothing to compact still lets the turn run.
    state, _ = _turn()
    state, _ = plan(state, OverBudget())
    assert plan(state, Compacted(completed=False))[1] == RequestTurn(1, 10, compacted=True)


def test_an_overflow_compacts_once_and_a_second_one_ends_the_activity() -> None:
    state, _ = _turn()
    state, effect = plan(state, TurnEnded(failed=True, overflow=True, queued_pending=True))
    assert effect == Compact(reason="auto", overflow=True)
    state, effect = plan(state, Compacted(completed=True))
    assert effect == RequestTurn(step=1, max_turns=10, compacted=True)
    state, effect = plan(state, TurnEnded(failed=True, overflow=True))
    assert effect == Idle()  # the ordinary failure: no second compaction


def test_an_overflow_whose_compaction_fails_keeps_the_failure() -> None:
    state, _ = _turn()
    state, _ = plan(state, TurnEnded(failed=True, overflow=True, queued_pending=True))
    state, effect = plan(state, Compacted(completed=False))
    assert effect == Open()  # the activity ended; the queued prompt opens the next one
    assert state.activities == 2


def test_manual_compaction_runs_first_in_an_idle_drain_or_at_the_next_boundary() -> None:
    state, effect = begin_drain(force=False, compact=True)
    assert effect == Compact(reason="manual")
    state, effect = plan(state, Compacted(completed=True))
    assert effect == Open()
    assert plan(state, Promoted(count=0, max_turns=5))[1] == Idle()

    state, _ = plan(begin_drain(force=False)[0], Promoted(count=1, max_turns=5))
    state, effect = plan(state, TurnEnded(local_tools=1))
    state, effect = plan(state, Promoted(count=0, max_turns=5, compact=True))
    assert effect == Compact(reason="manual")
    assert plan(state, Compacted(completed=False))[1] == RequestTurn(step=2, max_turns=5)


def test_budget_and_estimate() -> None:
    settings = CompactionSettings(buffer=1000)
    assert not over_budget(3000, context=4000, output=500, settings=settings)
    assert over_budget(3001, context=4000, output=500, settings=settings)
    assert over_budget(2001, context=4000, output=2000, settings=settings)
    assert not over_budget(2000, context=4000, output=30_000, settings=settings)  # half at most
    assert not over_budget(10**9, context=0, output=0, settings=settings)  # unknown window
    assert estimate_request(400, None) == 100
    assert estimate_request(400, UsageMark(200, 90)) == 140  # the provider's count + the rest
    assert estimate_request(100, UsageMark(200, 90)) == 25  # not an extension: estimated


def test_a_sessions_request_sizes_are_exact_and_encode_only_new_messages() -> None:
    history = HistoryView()
    rows = [(1, _user("u1", "hello")), (2, _answer("a1", "hi", _tool("c1", "x" * 500)))]
    history.apply(HistoryDelta(generation=0, version=2, full=True, entries=rows))
    chars = RequestChars()

    def request(messages: list[llm.Message]) -> llm.LLMRequest:
        return llm.LLMRequest(model=llm.ModelRef(provider_id="p", model_id="m"),
                              system=["be brief"], messages=messages)  # fmt: skip

    empty = request([])
    assert chars(empty) == request_chars(empty) and chars.cached == 0
    first = request(history.lowered(MODEL, None))
    assert chars(first) == request_chars(first) and chars.cached == len(first.messages)
    history.apply(
        HistoryDelta(generation=0, version=3, full=False, entries=[(3, _user("u2", "more"))])
    )
    second = request(history.lowered(MODEL, None))
    kept = [a for a, b in zip(first.messages, second.messages, strict=False) if a is b]
    assert kept and len(second.messages) > len(first.messages)  # the same objects go again
    assert chars(second) == request_chars(second)
    # An equal message that is another object is measured anew, and only the last
    # request's messages stay kept.
    replaced = request([llm.UserMessage(content=[llm.TextPart(text="other")])])
    assert chars(replaced) == request_chars(replaced) and chars.cached == 1


def test_request_sizes_follow_the_tool_catalog() -> None:
    chars = RequestChars()
    read = llm.ToolDefinition(name="read", description="Read a file", input_schema={})
    grep = llm.ToolDefinition(name="grep", description="Search", input_schema={"type": "object"})

    def request(*tools: llm.ToolDefinition) -> llm.LLMRequest:
        return llm.LLMRequest(model=llm.ModelRef(provider_id="p", model_id="m"),
                              system=["be brief"], messages=[], tools=list(tools))  # fmt: skip

    # The same definitions again (a new list), then one more, one fewer, another one.
    for tools in ((read,), (read,), (read, grep), (grep,), (read,), ()):
        assert chars(request(*tools)) == request_chars(request(*tools))


def _user(i: str, text: str) -> m.UserMessage:
    return m.UserMessage(id=i, time=TIME, text=text)


def _answer(i: str, text: str, *tools: m.AssistantTool) -> m.AssistantMessage:
    content = [m.AssistantText(id="t", text=text), *tools]
    return m.AssistantMessage(id=i, time=TIME, agent="build", model=MODEL, content=content)


def _tool(call: str, text: str, *, hosted: bool = False) -> m.AssistantTool:
    state = m.ToolCompleted(input={"q": call}, content=[ToolTextContent(text=text)], structured={})
    provider = ToolProviderInfo(executed=True) if hosted else ToolProviderInfo()
    return m.AssistantTool(
        id=call, name="read", state=state, time=m.ToolTime(created=1), provider=provider
    )


def test_the_checkpoint_keeps_the_pending_turn_and_never_crosses_native_messages() -> None:
    rows = [
        (0, _user("u1", "first")),
        (1, _answer("a1", "one", _tool("c1", "contents"))),
        (5, _user("u2", "second")),
        (6, m.SystemMessage(id="s1", time=TIME, text="date changed")),
    ]
    checkpoint = plan_checkpoint(rows)
    assert checkpoint is not None and checkpoint.boundary_seq == 1
    assert [message.id for _, message in checkpoint.compacted] == ["u1", "a1"]
    recent = recent_context(checkpoint, keep_tokens=1000, tool_chars=3)
    assert recent == (
        '[user]\nfirst\n\n[assistant]\none\n[tool call read] {"q\n[truncated]\n'
        "[tool result read]\ncon\n[truncated]"
    )
    assert recent_context(checkpoint, keep_tokens=5, tool_chars=3).startswith("[...]")
    ended = m.CompactionMessage(
        id="k1", time=TIME, reason="auto", summary="S", recent=recent,
        metadata=m.CompactionMetadata(boundary_seq=1),
    )  # fmt: skip
    rows.append((7, ended))
    visible = visible_history(rows, baseline_seq=8)
    assert [message.id for _, message in visible] == ["k1", "u2"]  # s1 predates the baseline
    view = HistoryView()
    view.apply(HistoryDelta(generation=0, version=1, full=True, entries=rows))
    lowered = view.lowered(MODEL, 8)
    assert [type(x).__name__ for x in lowered] == ["UserMessage", "UserMessage"]
    assert "<summary>\nS\n</summary>" in lowered[0].content[0].text
    assert plan_checkpoint(rows) is None  # nothing complete after the checkpoint


def test_tail_turns_bounds_the_recent_context_by_turns_within_its_token_budget() -> None:
    checkpoint = m.CompactionMessage(
        id="k0", time=TIME, reason="auto", summary="S", recent="",
        metadata=m.CompactionMetadata(boundary_seq=1),
    )  # fmt: skip
    rows = [
        (0, _user("u1", "first")),
        (1, _answer("a1", "step one", _tool("c1", "contents"))),
        (2, checkpoint),  # replaced u1 and a1 mid-turn: a1b ends that turn
        (3, _answer("a1b", "one done")),
        (4, _user("u2", "second")),
        (5, _answer("a2", "two")),
        (6, m.SyntheticMessage(id="y3", time=TIME, session_id="s", text="third")),
        (7, _answer("a3", "three")),
        (8, _user("u4", "pending")),
    ]
    plan = plan_checkpoint(rows)
    assert plan is not None and plan.boundary_seq == 7

    def recent(turns: int | None, keep_tokens: int = 1000) -> str:
        return recent_context(plan, keep_tokens=keep_tokens, tool_chars=100, tail_turns=turns)

    everything = "[assistant]\none done\n\n[user]\nsecond\n\n[assistant]\ntwo\n\n"
    assert (
        recent(None) == recent(3) == recent(9) == everything + "[user]\nthird\n\n[assistant]\nthree"
    )
    assert recent(2) == "[user]\nsecond\n\n[assistant]\ntwo\n\n[user]\nthird\n\n[assistant]\nthree"
    assert recent(1) == "[user]\nthird\n\n[assistant]\nthree"
    assert recent(0) == ""
    # The token budget still bounds the turns kept: newest messages first.
    assert recent(2, keep_tokens=9) == "[user]\nthird\n\n[assistant]\nthree"
    assert recent(None, keep_tokens=9) == recent(1, keep_tokens=9)


def test_the_summary_request_stays_within_the_window_and_names_the_previous_summary() -> None:
    rows = [(i, _user(f"u{i}", "x" * 4000)) for i in range(0, 40, 2)]
    rows += [(41, _answer("a", "done"))]
    checkpoint = plan_checkpoint(rows)
    assert checkpoint is not None
    request = summary_request(
        checkpoint, model=llm.ModelRef(provider_id="p", model_id="m"), prompt="P",
        settings=CompactionSettings(), context=8000, output=100_000,
    )  # fmt: skip
    text = request.messages[0].content[0].text
    assert len(text) / 4 < 8000 - 4096 and "earlier messages omitted]" in text
    assert request.generation.max_output_tokens == 4096


def test_pruning_spares_the_newest_results_the_current_turn_and_hosted_ones() -> None:
    big = "y" * 40_000  # 10000 tokens each
    rows = [
        (0, _user("u1", "go")),
        (1, _answer("a1", "", _tool("old1", big), _tool("hosted", big, hosted=True))),
        (2, _answer("a2", "", _tool("old2", big), _tool("old3", big))),
        (3, _answer("a3", "", *(_tool(f"new{i}", big) for i in range(4)))),
        (9, _user("u2", "more")),
        (10, _answer("a4", "", _tool("current", big))),
    ]
    settings = CompactionSettings(prune_protect=40_000, prune_minimum=20_000)
    assert prune_calls(rows, settings) == [("a2", "old3"), ("a2", "old2"), ("a1", "old1")]
    assert prune_calls(rows, CompactionSettings(prune_minimum=40_000)) == []
    pruned = m.AssistantTool(
        id="old1", name="read", state=_tool("old1", big).state,
        time=m.ToolTime(created=1, pruned=2),
    )  # fmt: skip
    lowered = lower_message(_answer("a", "", pruned), MODEL)
    assert lowered[1].content[0].content[0].text == PRUNED_RESULT
