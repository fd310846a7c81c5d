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


def test_sampling_keeps_a_share_of_traces_and_children_follow_their_root() -> None:
    exporter = InMemorySpanExporter()
    with recording(SimpleSpanProcessor(exporter), sample=0.25):
        for _ in range(400):
            with tracer.start_as_current_span("root"):
                with tracer.start_as_current_span("child"):
                    pass
    roots = [s for s in exporter.get_finished_spans() if s.name == "root"]
    children = [s for s in exporter.get_finished_spans() if s.name == "child"]
    assert 50 < len(roots) < 150  # a quarter of 400, give or take chance
    assert {c.parent.span_id for c in children if c.parent} == {r.context.span_id for r in roots}
    with recording(SimpleSpanProcessor(exporter), sample=0.0):
        with tracer.start_as_current_span("never") as never:
            assert not never.is_recording()


def test_sampled_roots_of_the_span_helper_are_recorded_once_chosen() -> None:
    exporter = InMemorySpanExporter()
    with recording(SimpleSpanProcessor(exporter), sample=0.5):
        for _ in range(400):
            with span("drain", root=True) as root:
                with span("provider.turn") as turn:
                    assert turn.is_recording() == root.is_recording()
    drains = [s for s in exporter.get_finished_spans() if s.name == "drain"]
    turns = [s for s in exporter.get_finished_spans() if s.name == "provider.turn"]
    assert 140 < len(drains) < 260  # one coin per trace: half of 400, give or take chance
    assert len(turns) == len(drains)


def test_top_level_spans_of_the_helper_draw_once_and_their_children_follow() -> None:
    exporter = InMemorySpanExporter()
    with recording(SimpleSpanProcessor(exporter), sample=0.5):
        for _ in range(400):
            with span("admission") as top:  # no current span: a new trace, not root=True
                assert (current_span_context() is not None) == top.is_recording()
                with span("storage.batch") as child:
                    assert child.is_recording() == top.is_recording()
    tops = [s for s in exporter.get_finished_spans() if s.name == "admission"]
    children = [s for s in exporter.get_finished_spans() if s.name == "storage.batch"]
    assert 140 < len(tops) < 260  # half of 400, give or take chance
    assert all(s.parent is None for s in tops)
    assert {c.parent.span_id for c in children if c.parent} == {t.context.span_id for t in tops}


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
