"""The project's tracer records spans only inside ``recording``, into that context's processor."""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from runtime.telemetry import active_processor, current_span_context, recording, span, tracer


def test_spans_outside_recording_are_dropped() -> None:
    with tracer.start_as_current_span("nothing") as span:
        assert not span.is_recording()
    assert active_processor() is None


def test_spans_inside_recording_reach_its_processor_with_parent_links() -> None:
    exporter = InMemorySpanExporter()
    with recording(SimpleSpanProcessor(exporter)):
        with tracer.start_as_current_span("outer", attributes={"k": 1}):
            with tracer.start_as_current_span("inner"):
                pass
    with tracer.start_as_current_span("after"):
        pass
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"outer", "inner"}
    assert spans["inner"].parent is not None
    assert spans["inner"].parent.span_id == spans["outer"].context.span_id
    assert spans["outer"].attributes == {"k": 1}


async def test_two_recordings_in_one_process_keep_their_spans_apart() -> None:
    first, second = InMemorySpanExporter(), InMemorySpanExporter()

    async def work(name: str) -> None:
        with tracer.start_as_current_span(name):
            await trio.lowlevel.checkpoint()

    async def run(exporter: InMemorySpanExporter, name: str) -> None:
        with recording(SimpleSpanProcessor(exporter)):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(work, name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, first, "a")
        nursery.start_soon(run, second, "b")
    assert [s.name for s in first.get_finished_spans()] == ["a"]
    assert [s.name for s in second.get_finished_spans()] == ["b"]


def test_every_trace_is_recorded_inside_recording_and_children_follow_their_root() -> None:
    # Which traces are kept is the processor's choice once they end (tail sampling, see
    # test_tail_sampling.py): the tracer records them all.
    exporter = InMemorySpanExporter()
    with recording(SimpleSpanProcessor(exporter)):
        for _ in range(10):
            with tracer.start_as_current_span("root"):
                with tracer.start_as_current_span("child"):
                    pass
            with span("drain", root=True) as root:
                with span("provider.turn") as turn:
                    assert turn.is_recording() and root.is_recording()
            with span("admission") as top:  # no current span: a new trace, not root=True
                assert current_span_context() == top.get_span_context()
    names = [s.name for s in exporter.get_finished_spans()]
    assert {name: names.count(name) for name in names} == {
        "root": 10, "child": 10, "drain": 10, "provider.turn": 10, "admission": 10
    }  # fmt: skip
    spans = exporter.get_finished_spans()
    roots = {s.context.span_id for s in spans if s.name == "root"}
    assert {s.parent.span_id for s in spans if s.name == "child" and s.parent} == roots


async def test_a_failed_block_is_an_error_and_a_cancelled_one_is_interrupted() -> None:
    exporter = InMemorySpanExporter()
    with recording(SimpleSpanProcessor(exporter)):
        with pytest.raises(ValueError, match="boom"), span("tool"):
            raise ValueError("boom")
        with trio.CancelScope() as scope:
            scope.cancel()
            with span("provider.turn"):
                await trio.sleep(1)
        assert not trace.get_current_span().get_span_context().is_valid  # both detached
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["tool"].status.status_code is StatusCode.ERROR
    assert spans["tool"].status.description == "ValueError: boom"
    assert spans["provider.turn"].status.status_code is StatusCode.UNSET
    assert spans["provider.turn"].attributes == {"kittiwake.outcome": "interrupted"}
    assert spans["provider.turn"].end_time is not None
