"""A prompt's work as spans: one trace per drain, linked to its admission, nested durations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime import events as ev
from runtime import llm
from storage import Events, TelemetryOptions, Usage
from tests.execution.conftest import answer, prompt, running, tool_calls

FAST = TelemetryOptions(flush_interval=0.01, sample=1.0)


def priced_answer(text: str, *, input_tokens: int, output_tokens: int, cached: int, cost: float):
    events = answer(text)
    usage = llm.Usage(
        input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cached
    )
    events[-1] = llm.StepFinish(finish_reason="stop", usage=usage, cost=cost)
    return events


async def test_a_prompt_with_a_tool_call_is_one_drain_trace_linked_to_its_admission(
    tmp_path: Path,
) -> None:
    client = llm.ScriptedLLM([tool_calls(("c1", "echo", {"text": "hi"})), answer("done")])
    async with running(tmp_path, client, telemetry=FAST) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("call echo"))
        await rt.sessions.wait_idle(sid)
        assert rt.telemetry.force_flush()
        spans = rt.telemetry.spans(session_id=sid)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_name.setdefault(s["name"], []).append(s)
    [admission] = by_name["admission"]
    [drain] = by_name["drain"]
    turns = by_name["provider.turn"]
    [tool] = by_name["tool"]
    assert len(turns) == 2
    assert by_name["storage.batch"], "storage batches are in the traces"
    assert by_name["context.reconcile"]
    # One trace per drain, a root linked to the admission's span.
    assert drain["parent_id"] is None
    assert drain["trace_id"] != admission["trace_id"]
    assert {"trace_id": admission["trace_id"], "span_id": admission["span_id"]} in drain["links"]
    ids = {s["span_id"]: s for s in spans}
    for turn in turns:
        assert turn["parent_id"] == drain["span_id"]
        assert turn["trace_id"] == drain["trace_id"]
        assert turn["session_id"] == sid and turn["model"] == "default"
    assert tool["parent_id"] == turns[0]["span_id"]
    assert tool["attributes"]["gen_ai.tool.name"] == "echo"
    assert tool["attributes"]["kittiwake.tool.outcome"] == "success"
    # Every storage batch span hangs under a span of its trace; durations nest.
    for batch in by_name["storage.batch"]:
        parent = ids[batch["parent_id"]]
        assert batch["trace_id"] == parent["trace_id"]
        assert batch["attributes"]["kittiwake.storage.operations"] >= 1
        assert batch["attributes"]["kittiwake.storage.commit_ms"] >= 0
    for child in spans:
        parent = ids.get(child["parent_id"] or "")
        if parent is None or child["name"] == "storage.batch":
            continue  # a batch's commit may end after its writer went on
        assert parent["start_ns"] <= child["start_ns"] <= child["end_ns"] <= parent["end_ns"]
    assert turns[0]["attributes"]["gen_ai.response.finish_reasons"] == ["tool-calls"]
    assert turns[0]["ttft_ms"] is not None and turns[0]["ttft_ms"] >= 0


async def test_summary_figures_computed_in_sql_match_the_events(tmp_path: Path) -> None:
    client = llm.ScriptedLLM(
        [
            priced_answer("one", input_tokens=100, output_tokens=20, cached=40, cost=0.0125),
            priced_answer("two", input_tokens=300, output_tokens=7, cached=0, cost=0.5),
        ]
    )
    async with running(tmp_path, client, telemetry=FAST) as rt:
        sid = rt.test_session
        for text in ("first", "second"):
            await rt.sessions.prompt(sid, prompt=prompt(text))
            await rt.sessions.wait_idle(sid)
        assert rt.telemetry.force_flush()
        by_session = rt.telemetry.summary("session")
        by_model = rt.telemetry.summary("model")
        by_day = rt.telemetry.summary("day")
        stored = await rt.storage.read(Events(session_id=sid, after=-1, limit=1000))
        [exact] = await rt.storage.read(Usage(by="session"))
    decoded = [ev.decode_event(e.data) for e in stored]
    steps = [e for e in decoded if isinstance(e, ev.StepEnded)]
    [row] = [r for r in by_session if r["key"] == sid]
    assert row["turns"] == 2
    assert row["tokens_in"] == 400 and row["tokens_out"] == 27 and row["tokens_cached"] == 40
    assert row["cost"] == 0.5125
    assert row["errors"] == 0
    assert row["turn_p50_ms"] is not None and row["commit_p99_ms"] is not None
    [model] = [r for r in by_model if r["key"] == "default"]
    assert (model["turns"], model["tokens_in"], model["cost"]) == (2, 400, 0.5125)
    assert sum(r["turns"] for r in by_day) == 2
    # The durable record agrees with the telemetry.
    assert len(steps) == row["turns"]
    assert sum(s.cost for s in steps) == row["cost"]
    assert sum(s.tokens.input for s in steps) == row["tokens_in"]
    assert sum(s.tokens.output for s in steps) == row["tokens_out"]
    assert sum(s.tokens.cache.read for s in steps) == row["tokens_cached"]
    # The event store's own sums (what the summary route reports as exact) agree too.
    assert (exact.key, exact.turns, exact.tokens_in, exact.tokens_out) == (sid, 2, 400, 27)
    assert (exact.tokens_cached, exact.cost, exact.errors) == (40, 0.5125, 0)


async def test_prompt_and_answer_text_are_recorded_only_when_configured(tmp_path: Path) -> None:
    for record_text in (False, True):
        client = llm.ScriptedLLM([answer("the secret answer")])
        options = TelemetryOptions(flush_interval=0.01, record_text=record_text, sample=1.0)
        async with running(tmp_path / str(record_text), client, telemetry=options) as rt:
            sid = rt.test_session
            await rt.sessions.prompt(sid, prompt=prompt("the secret prompt"))
            await rt.sessions.wait_idle(sid)
            assert rt.telemetry.force_flush()
            spans = {s["name"]: s for s in rt.telemetry.spans(session_id=sid)}
        admission, turn = spans["admission"]["attributes"], spans["provider.turn"]["attributes"]
        if record_text:
            assert admission["kittiwake.prompt"] == "the secret prompt"
            assert turn["kittiwake.answer"] == "the secret answer"
        else:
            assert "kittiwake.prompt" not in admission and "kittiwake.answer" not in turn
