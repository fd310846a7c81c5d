"""The spans of ``runtime.telemetry.span`` reach a ``SpanRecorder`` (the telemetry tables)
without the SDK's span objects, and are stored exactly as the SDK's spans are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import attach, detach
from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode

from runtime.telemetry import (
    RecordedSpan,
    child_span,
    current_span_context,
    recording,
    span,
    tracer,
)
from storage import TelemetryOptions, TelemetryStore


def _work(admission_text: str) -> None:
    """Spans of every shape the runtime makes: a linked root, attributes set later (a
    list, a None, prompt text), an event, an error, a cancelled-like attribute, a child
    started on the side and ended later."""
    with span("admission", {"session.id": "ses_r", "kittiwake.delivery": "queue"}) as top:
        top.set_attribute("kittiwake.prompt", admission_text)
        link = current_span_context()
    assert link is not None
    with span("drain", {"session.id": "ses_r"}, root=True, links=[link]):
        with span("provider.turn", {"gen_ai.request.model": "m", "kittiwake.step": 1}) as turn:
            turn.set_attributes({
                "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 2,
                "kittiwake.cost": 0.5, "gen_ai.response.finish_reasons": ["stop"],
                "kittiwake.none": None,  # type: ignore[dict-item]
            })  # fmt: skip
            turn.add_event("provider.retry", {"attempt": 1})
            batch = child_span("storage.batch", {"kittiwake.storage.operations": 2})
            assert batch is not None
        batch.set_attributes({"kittiwake.storage.commit_ms": 1.5})
        batch.end()
        with pytest.raises(ValueError, match="boom"), span("tool", {"gen_ai.tool.name": "x"}):
            raise ValueError("boom")


def _stored(store: TelemetryStore) -> list[dict[str, Any]]:
    """The stored rows without ids and times, parents as names."""
    rows = store.spans(session_id="ses_r")
    names = {row["span_id"]: row["name"] for row in rows}
    kept = []
    for row in sorted(rows, key=lambda r: r["name"]):
        row = dict(row)
        row["parent"] = names.get(row.pop("parent_id"))
        row["linked"] = [names.get(link["span_id"]) for link in row.pop("links")]
        for key in ("trace_id", "span_id", "start_ns", "end_ns", "duration_ms"):
            row.pop(key)
        row["events"] = [{k: v for k, v in e.items() if k != "time_ns"} for e in row["events"]]
        kept.append(row)
    return kept


def test_recorded_spans_are_stored_as_the_sdks_spans_are(tmp_path: Path) -> None:
    options = TelemetryOptions(flush_interval=0, sample=1.0)
    straight = TelemetryStore.open(tmp_path / "straight", options)
    through_sdk = TelemetryStore.open(tmp_path / "sdk", options)
    sdk = SynchronousMultiSpanProcessor()  # not a SpanRecorder: the SDK's spans
    sdk.add_span_processor(through_sdk)
    try:
        with recording(straight):
            _work("secret")
        with recording(sdk):
            _work("secret")
        rows = _stored(straight)
        assert rows == _stored(through_sdk)
        by_name = {row["name"]: row for row in rows}
        assert set(by_name) == {"admission", "drain", "provider.turn", "storage.batch", "tool"}
        assert by_name["drain"]["parent"] is None and by_name["drain"]["linked"] == ["admission"]
        assert by_name["storage.batch"]["parent"] == "provider.turn"
        turn = by_name["provider.turn"]
        assert (turn["tokens_in"], turn["tokens_out"], turn["cost"]) == (10, 2, 0.5)
        assert turn["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
        assert turn["attributes"]["kittiwake.none"] is None  # kept as the SDK keeps it
        assert turn["events"] == [{"name": "provider.retry", "attempt": 1}]
        assert "kittiwake.prompt" not in by_name["admission"]["attributes"]  # no record_text
        assert (by_name["tool"]["status"], by_name["tool"]["status_message"]) == (
            "error", "ValueError: boom",
        )  # fmt: skip
    finally:
        straight.shutdown()
        sdk.shutdown()


def test_a_recorded_span_keeps_the_sdks_rules() -> None:
    ended: list[RecordedSpan] = []
    recorded = RecordedSpan("tool", None, {"a": 1}, (), ended.append)
    assert recorded.is_recording() and recorded.parent is None
    recorded.set_status(StatusCode.UNSET)  # ignored
    recorded.set_status(Status(StatusCode.OK))
    recorded.set_status(StatusCode.ERROR, "later")  # OK is final
    recorded.set_attribute("b", (1, 2))
    recorded.record_exception(ValueError("bad"))
    recorded.end()
    recorded.end()  # once
    recorded.set_attribute("c", 3)  # after the end: ignored
    assert ended == [recorded] and not recorded.is_recording()
    assert recorded.status.status_code is StatusCode.OK
    assert recorded.attributes == {"a": 1, "b": (1, 2)}
    [event] = recorded.events
    assert event.name == "exception" and event.attributes is not None
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "bad"
    listed = RecordedSpan("turn", None, {"l": ["stop"], "n": None}, (), ended.append)
    listed.set_attributes({"m": {"nested": [1]}, "t": ("a", 1)})  # the SDK's own cleaning
    assert listed.attributes == {"l": ("stop",), "n": None, "m": {"nested": (1,)}, "t": ("a", 1)}
    many = RecordedSpan("wide", None, {f"k{i}": i for i in range(200)}, (), ended.append)
    assert len(many.attributes) == 128  # the SDK's default limit, the oldest dropped
    assert "k199" in many.attributes and "k0" not in many.attributes


def test_child_span_is_none_unless_the_current_span_is_recorded(tmp_path: Path) -> None:
    assert child_span("storage.batch") is None  # nothing records here
    store = TelemetryStore.open(tmp_path, TelemetryOptions(flush_interval=0, sample=1.0))
    try:
        unsampled = SpanContext(trace_id=7, span_id=8, is_remote=False)  # not sampled
        token = attach(trace.set_span_in_context(NonRecordingSpan(unsampled)))
        try:
            with recording(store), span("drain"):  # a trace not recorded here
                assert child_span("storage.batch") is None
        finally:
            detach(token)
        with recording(store):
            assert child_span("storage.batch") is None  # no current span
            with span("drain", root=True) as drain:
                side = child_span("storage.batch")
                assert isinstance(side, RecordedSpan)
                assert side.parent == drain.get_span_context()
                assert side.context.trace_id == drain.get_span_context().trace_id
                side.end()
        assert sorted(s["name"] for s in store.spans()) == ["drain", "storage.batch"]
    finally:
        store.shutdown()


def test_a_span_started_through_the_api_inside_the_helpers_is_the_parent_while_current(
    tmp_path: Path,
) -> None:
    store = TelemetryStore.open(tmp_path, TelemetryOptions(flush_interval=0, sample=1.0))
    try:
        with recording(store), span("drain", root=True):
            with tracer.start_as_current_span("sdk") as sdk:
                with span("inside") as inside:
                    assert inside.parent == sdk.get_span_context()  # type: ignore[attr-defined]
                assert current_span_context() == sdk.get_span_context()
            with span("after"):
                pass
        rows = {row["name"]: row for row in store.spans()}
        assert rows["inside"]["parent_id"] == rows["sdk"]["span_id"]
        assert rows["sdk"]["parent_id"] == rows["drain"]["span_id"]
        assert rows["after"]["parent_id"] == rows["drain"]["span_id"]
    finally:
        store.shutdown()
