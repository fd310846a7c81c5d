"""Retention by age and size; a SIGKILL loses at most the unflushed spans, never an event,
and leaves both the telemetry tables and the event store readable; queries read every
span ended before them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
from opentelemetry.trace import Status, StatusCode

from runtime import open_runtime
from runtime.telemetry import recording, tracer
from storage import Events, TelemetryOptions, TelemetryStore

_CHILD = Path(__file__).with_name("telemetry_child.py")
DAY_NS = 86_400 * 10**9


def _spans(store: TelemetryStore, count: int, *, start_ns: int, step_ns: int = 1000) -> None:
    with recording(store):
        for i in range(count):
            begin = start_ns + i * step_ns
            span = tracer.start_span("tool", start_time=begin, attributes={"session.id": "ses_x"})
            span.end(end_time=begin + step_ns)
    assert store.force_flush()


def test_retention_deletes_spans_older_than_the_configured_days(tmp_path: Path) -> None:
    store = TelemetryStore.open(
        tmp_path, TelemetryOptions(retention_days=2, flush_interval=0, sample=1.0)
    )
    try:
        now = time.time_ns()
        _spans(store, 5, start_ns=now - 3 * DAY_NS)
        _spans(store, 7, start_ns=now - DAY_NS)
        assert len(store.spans()) == 12
        assert store.retain(now) == 5
        kept = store.spans()
        assert len(kept) == 7
        assert min(s["start_ns"] for s in kept) >= now - DAY_NS
    finally:
        store.shutdown()


def test_retention_deletes_the_oldest_spans_beyond_the_size_bound(tmp_path: Path) -> None:
    store = TelemetryStore.open(
        tmp_path, TelemetryOptions(flush_interval=0, batch_max=50_000, sample=1.0)
    )
    try:
        now = time.time_ns()
        _spans(store, 4000, start_ns=now - 3_600 * 10**9)
        assert store.retain(now) == 0  # within both bounds
        used = store.used_bytes()
        store.options = msgspec.structs.replace(store.options, max_bytes=used // 2)
        deleted = store.retain(now)
        kept = store.spans(limit=5000)
        assert 0 < deleted < 4000 and len(kept) == 4000 - deleted
        # The newest survive: the oldest kept is younger than every deleted one.
        assert kept[0]["start_ns"] == now - 3_600 * 10**9 + deleted * 1000
    finally:
        store.shutdown()


async def test_sigkill_loses_at_most_unflushed_spans_and_never_an_event(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    child = subprocess.Popen(  # noqa: ASYNC220 - read line by line until the kill
        [sys.executable, str(_CHILD), str(data), str(work)], stdout=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    assert child.stdout is not None
    admitted: list[str] = []
    flushed = 0
    for line in child.stdout:
        kind, value = line.split()
        if kind == "PROMPT":
            admitted.append(value)
        else:
            flushed = int(value)
        if flushed and len(admitted) >= 12:  # spans are being written as it dies
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    child.stdout.close()
    store = TelemetryStore.open(data)
    try:
        spans = store.spans(limit=5000)
        assert len(spans) >= flushed > 0
        assert {s["name"] for s in spans} >= {"admission", "drain", "provider.turn"}
        assert store.summary("model")  # the tables answer SQL
    finally:
        store.shutdown()
    async with open_runtime(data_dir=data) as rt:
        [session] = (await rt.sessions.list()).data
        events = await rt.storage.read(Events(session_id=session.id, after=-1, limit=100_000))
    stored = b"".join(e.data for e in events)
    for message_id in admitted:  # every admitted prompt survived the kill
        assert message_id.encode() in stored, message_id


def test_queries_write_the_queued_spans_first(tmp_path: Path) -> None:
    store = TelemetryStore.open(tmp_path, TelemetryOptions(flush_interval=3600))
    try:
        with recording(store):
            span = tracer.start_span("tool", attributes={"session.id": "ses_q"})
            span.set_status(Status(StatusCode.ERROR, "failed"))
            span.end()
        assert store.statistics()["queued"] == 1  # an hour before the writer would write
        assert [s["name"] for s in store.spans(session_id="ses_q")] == ["tool"]
        assert store.statistics()["queued"] == 0 and store.written == 1
        assert [e["message"] for e in store.errors()] == ["failed"]
        assert [row["key"] for row in store.summary("session")] == ["ses_q"]
    finally:
        store.shutdown()
