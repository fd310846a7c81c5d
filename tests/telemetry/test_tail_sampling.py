"""Tail sampling: every trace is recorded, a finished span costs its thread an append to a
bounded buffer, and the writer keeps whole traces: any with an error, any whose root was
slower than the running p95 of its name, the configured share of the rest."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio
from opentelemetry.trace import SpanContext, Status, StatusCode

from runtime import Location, Prompt, llm, open_runtime
from runtime.telemetry import RecordedSpan, SpanBuffer, TailSampler, recording, span
from storage import TelemetryOptions, TelemetryStore
from tests.execution.conftest import answer

MS = 1_000_000


def _ended(
    name: str, parent: RecordedSpan | None = None, *, ms: int = 1, error: bool = False,
) -> RecordedSpan:  # fmt: skip
    """A finished span of *ms* milliseconds under *parent* (a new trace without one)."""
    recorded = RecordedSpan(name, parent.context if parent else None, None, (), lambda s: None)
    if error:
        recorded.set_status(Status(StatusCode.ERROR, "boom"))
    recorded.end(recorded.start_time + ms * MS)
    return recorded


def _trace(name: str = "drain", *, ms: int = 1, error: bool = False) -> list[RecordedSpan]:
    """A root with two children, in the order they end (children first)."""
    root = RecordedSpan(name, None, None, (), lambda s: None)
    children = [_ended("provider.turn", root, error=error), _ended("storage.batch", root)]
    root.end(root.start_time + ms * MS)
    return [*children, root]


def test_the_buffer_holds_its_bound_and_counts_what_it_drops() -> None:
    buffer: SpanBuffer[int] = SpanBuffer(3)
    assert [buffer.append(n) for n in range(5)] == [1, 2, 3, 0, 0]
    assert (len(buffer), buffer.dropped) == (3, 2)
    assert list(buffer.take()) == [0, 1, 2] and len(buffer) == 0
    assert buffer.append(9) == 1


def test_at_rate_0_only_failed_and_slow_traces_are_kept() -> None:
    sampler: TailSampler[RecordedSpan] = TailSampler(0.0, warmup=20)
    normal = [s for _ in range(20) for s in _trace(ms=10)]
    assert sampler.offer(normal) == []  # below the warm-up nothing is slow, and none drawn
    failed = _trace(ms=10, error=True)
    assert sampler.offer(failed) == failed
    slow = _trace(ms=50)
    assert sampler.offer(slow) == slow
    assert sampler.offer(_trace(ms=10)) == []
    counts = sampler.counts
    assert (counts.errors, counts.slow, counts.sampled, counts.dropped) == (1, 1, 0, 21)
    assert counts.spans_dropped == 63


def test_at_rate_1_every_trace_is_kept_and_a_late_span_follows_its_trace() -> None:
    sampler: TailSampler[RecordedSpan] = TailSampler(1.0)
    spans = _trace()
    assert sampler.offer(spans) == spans
    late = _ended("storage.batch", spans[-1])  # ended after its root (another thread)
    assert sampler.offer([late]) == [late]
    dropping: TailSampler[RecordedSpan] = TailSampler(0.0)
    gone = _trace()
    assert dropping.offer(gone) == [] and dropping.offer([_ended("x", gone[-1])]) == []
    assert dropping.counts.spans_dropped == 4


def test_a_trace_waits_for_its_root_within_the_pending_bound() -> None:
    sampler: TailSampler[RecordedSpan] = TailSampler(0.0, pending_max=2)
    root = RecordedSpan("drain", None, None, (), lambda s: None)  # still running
    failed = _ended("tool", root, error=True)
    assert sampler.offer([failed]) == [] and sampler.pending == 1
    root.end()
    assert sampler.offer([root]) == [failed, root] and sampler.pending == 0
    # Past the bound the oldest waiting trace is decided without its root.
    open_roots = [RecordedSpan("drain", None, None, (), lambda s: None) for _ in range(3)]
    children = [_ended("tool", r, error=n == 0) for n, r in enumerate(open_roots)]
    assert sampler.offer(children) == [children[0]]
    assert sampler.pending == 2 and sampler.counts.evicted == 1
    assert sampler.flush() == [] and sampler.pending == 0


def test_the_store_drops_and_counts_spans_past_its_buffer(tmp_path: Path) -> None:
    options = TelemetryOptions(flush_interval=60, buffer_max=10, batch_max=100, sample=1.0)
    store = TelemetryStore.open(tmp_path, options)
    try:
        with recording(store):
            for _ in range(15):
                with span("drain", root=True):
                    pass
        figures = store.statistics()
        assert (figures["queued"], figures["buffer_full"], figures["dropped"]) == (10, 5, 5)
        assert figures["written"] == 0  # nothing written on the threads that ended them
        assert store.force_flush()
        assert len(store.spans()) == 10 and store.statistics()["written"] == 10
    finally:
        store.shutdown()


class _Provider:
    """Answers "ok", after *delay* seconds; a provider error instead while *failing*."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.failing = False

    def model_limit(self, model: Any) -> None:
        return None

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.LLMEvent]:
        await trio.sleep(self.delay)
        if self.failing:
            yield llm.StepStart()
            yield llm.ProviderError(kind="terminal", message="the model refused")
            return
        for event in answer("ok"):
            yield event


def _turns(tmp_path: Path, sample: float, provider: _Provider) -> Any:
    options = TelemetryOptions(flush_interval=0.01, sample=sample)
    return open_runtime(data_dir=tmp_path / "data", llm=provider, telemetry=options)


async def _prompt(rt: Any, sid: str) -> None:
    await rt.sessions.prompt(sid, prompt=Prompt(text="hi"))
    await rt.sessions.wait_idle(sid)


def _stored(store: TelemetryStore, sid: str) -> dict[str, list[dict[str, Any]]]:
    """The stored spans of *sid*'s traces by trace, of the traces rooted in a drain."""
    traces: dict[str, list[dict[str, Any]]] = {}
    for row in store.spans(session_id=sid):
        traces.setdefault(row["trace_id"], []).append(row)
    return {
        trace_id: rows for trace_id, rows in traces.items()
        if any(r["name"] == "drain" and r["parent_id"] is None for r in rows)
    }  # fmt: skip


async def test_a_failed_turns_trace_is_kept_at_rate_0(tmp_path: Path) -> None:
    provider = _Provider()
    async with _turns(tmp_path, 0.0, provider) as rt:
        info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
        await _prompt(rt, info.id)
        provider.failing = True
        await _prompt(rt, info.id)
        assert rt.telemetry.force_flush()
        stored = await trio.to_thread.run_sync(_stored, rt.telemetry, info.id)
        counts = rt.telemetry.statistics()["traces"]
    [rows] = stored.values()  # the failed turn's drain only
    turn = next(r for r in rows if r["name"] == "provider.turn")
    assert turn["status"] == "error" and "the model refused" in turn["status_message"]
    assert {r["name"] for r in rows} >= {"drain", "provider.turn", "storage.batch"}
    assert counts["errors"] >= 1


async def test_normal_turns_are_dropped_at_rate_0_and_kept_at_rate_1(tmp_path: Path) -> None:
    for sample, expected in ((0.0, 0), (1.0, 5)):
        async with _turns(tmp_path / str(sample), sample, _Provider()) as rt:
            info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
            for _ in range(5):
                await _prompt(rt, info.id)
            assert rt.telemetry.force_flush()
            stored = await trio.to_thread.run_sync(_stored, rt.telemetry, info.id)
        assert len(stored) == expected, sample
        for rows in stored.values():
            assert {r["name"] for r in rows} >= {"drain", "provider.turn", "storage.batch"}


async def test_a_turn_slower_than_the_running_p95_is_kept_at_rate_0(tmp_path: Path) -> None:
    provider = _Provider()
    async with _turns(tmp_path, 0.0, provider) as rt:
        info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
        for _ in range(20):  # the warm-up: none of these can count as slow
            await _prompt(rt, info.id)
        assert rt.telemetry.force_flush()
        p95_ms = rt.telemetry.statistics()["p95_ms"]["drain"]
        assert await trio.to_thread.run_sync(_stored, rt.telemetry, info.id) == {}
        provider.delay = max(5 * p95_ms / 1000, 0.05)  # a slow provider this time
        await _prompt(rt, info.id)
        assert rt.telemetry.force_flush()
        stored = await trio.to_thread.run_sync(_stored, rt.telemetry, info.id)
        counts = rt.telemetry.statistics()["traces"]
    [rows] = stored.values()
    drain = next(r for r in rows if r["name"] == "drain")
    assert drain["duration_ms"] >= provider.delay * 1000 > p95_ms
    assert {r["name"] for r in rows} >= {"drain", "provider.turn", "storage.batch"}
    assert counts["slow"] >= 1 and counts["errors"] == 0


def test_a_remote_parent_makes_a_local_root(tmp_path: Path) -> None:
    sampler: TailSampler[RecordedSpan] = TailSampler(1.0)
    remote = SpanContext(trace_id=5, span_id=6, is_remote=True)
    child = RecordedSpan("GET /x", remote, None, (), lambda s: None)
    child.end()
    assert sampler.offer([child]) == [child] and sampler.pending == 0
