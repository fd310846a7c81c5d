"""Telemetry costs: a span's CPU, spans written per second, the summary query over many spans.

Usage: .venv/bin/python bench/telemetry.py [--spans 50000] [--rows 1000000] [--prompts 300]
                                          [--rounds 5] [--pairs 0] [--sample 0.05]

- span CPU: process time (every thread), and the thread time of the thread that ends the
  spans, per ``runtime.telemetry.span`` block (each one trace) with nothing recording,
  recorded into an SDK processor that drops it (the SDK's spans: what an OTLP exporter
  beside the tables costs), recorded as a ``RecordedSpan`` that is dropped (the span
  helper's own cost), recorded into the ``TelemetryStore`` and sampled out by its tail
  sampler (rate 0), and kept and written (rate 1: the span, its sampling, its row and the
  write);
- spans written per second: wall time from the first span started to the last one
  committed in ``telemetry.duckdb``, spans made as fast as one thread can;
- CPU per prompt: process time (every thread: the runtime's, the store's, DuckDB's, the
  telemetry writer's) per prompt answered by a zero-latency ScriptedLLM with one tool call,
  ``--prompts`` sequential prompts in one session, telemetry off / on / sampled at 10% / 0%,
  interleaved ``--rounds`` times (CPU time is steadier than wall time on a shared machine);
  with ``--pairs N`` instead, off against ``--sample`` only, N pairs in alternating order
  (``bench/_pairs.py``: medians, the median paired overhead, the faster quartiles');
- summary query: ``--rows`` spans generated in DuckDB (provider turns, tools and storage
  batches over 100 sessions, 4 models and 30 days), then ``TelemetryStore.summary`` by
  model, session and day, and ``spans(session_id=...)``: median of 5 wall times each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._pairs import first_is_off, pair_report  # noqa: E402
from runtime.telemetry import RecordedSpan, SpanRecorder, recording, span  # noqa: E402
from storage import TelemetryOptions, TelemetryStore  # noqa: E402

ATTRIBUTES = {"session.id": "ses_bench", "gen_ai.tool.name": "read", "kittiwake.tool.bytes": 10}


class _Drop(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        return None


class _DropRecorded(SpanRecorder):
    def record(self, span: RecordedSpan) -> None:
        return None


class _Keep(SpanProcessor):
    def __init__(self, kept: list[ReadableSpan]) -> None:
        self.kept = kept

    def on_end(self, span: ReadableSpan) -> None:
        self.kept.append(span)


def _spans(count: int) -> None:
    for _ in range(count):
        with span("tool", ATTRIBUTES):
            pass


def span_cpu(count: int) -> None:
    directory = tempfile.mkdtemp()
    # One thread making spans as fast as it can outruns the writer (which needs the same
    # GIL): a buffer for all of them, so that none is dropped.
    store = TelemetryStore.open(directory, TelemetryOptions(sample=1.0, buffer_max=count + 1))
    dropping = TelemetryStore.open(
        tempfile.mkdtemp(), TelemetryOptions(sample=0.0, buffer_max=count + 1)
    )
    try:
        for label, processor in (
            ("nothing recording", None), ("recorded through the SDK, dropped", _Drop()),
            ("recorded (RecordedSpan), dropped", _DropRecorded()),
            ("recorded into the tables, sampled out (rate 0)", dropping),
            ("recorded into the tables and written (rate 1)", store),
        ):  # fmt: skip
            started, on_thread = time.process_time(), time.thread_time()
            if processor is None:
                _spans(count)
            else:
                with recording(processor):
                    _spans(count)
            on_thread = time.thread_time() - on_thread
            if processor is not None:
                processor.force_flush()
            per = (time.process_time() - started) / count * 1e6
            print(f"span CPU, {label}: {per:.1f} us in all, {on_thread / count * 1e6:.1f} us"
                  " on the thread that ends it")  # fmt: skip
        print("dropped for a full buffer:", store.statistics()["buffer_full"],
              dropping.statistics()["buffer_full"])  # fmt: skip
        started = time.perf_counter()
        before = store.written
        with recording(store):
            _spans(count)
        store.force_flush()
        rate = (store.written - before) / (time.perf_counter() - started)
        print(f"spans written per second (one thread making them): {rate:,.0f}")
        kept: list[ReadableSpan] = []
        keeper = _Keep(kept)
        with recording(keeper):
            _spans(count)
        before = store.written
        started = time.perf_counter()
        for item in kept:
            store.on_end(item)
        store.force_flush()
        rate = (store.written - before) / (time.perf_counter() - started)
        print(f"spans written per second (the writer alone, {count:,} queued): {rate:,.0f}")
    finally:
        store.shutdown()
        dropping.shutdown()


_GENERATE = """
insert into spans
select
    printf('%032x', i // 8) as trace_id,
    printf('%016x', i) as span_id,
    case when i % 8 = 0 then null else printf('%016x', i - i % 8) end as parent_id,
    case when i % 8 = 0 then 'drain' when i % 8 in (1, 4) then 'provider.turn'
         when i % 8 in (2, 5) then 'tool' else 'storage.batch' end as name,
    'internal' as kind,
    $now - i * (2592000000000000 // $rows) as start_ns,
    $now - i * (2592000000000000 // $rows) + 1000000 * (1 + i % 97) as end_ns,
    1 + i % 97 as duration_ms,
    case when i % 101 = 0 then 'error' else 'unset' end as status,
    null as status_message,
    'ses_' || ((i // 8) % 100) as session_id,
    'bench' as provider,
    case when i % 8 in (1, 4) then 'model-' || ((i // 8) % 4) end as model,
    case when i % 8 in (1, 4) then 1000 + i % 500 end as tokens_in,
    case when i % 8 in (1, 4) then 50 + i % 80 end as tokens_out,
    case when i % 8 in (1, 4) then i % 300 end as tokens_cached,
    case when i % 8 in (1, 4) then 0.001 * (i % 7) end as cost,
    case when i % 8 in (1, 4) then 100 + i % 900 end as ttft_ms,
    '{"bench": true}' as attributes, null as events, null as links
from range($rows) t(i)
"""


def summary_query(rows: int) -> None:
    directory = tempfile.mkdtemp()
    store = TelemetryStore.open(directory, TelemetryOptions(retention_days=31))
    try:
        now = time.time_ns()
        started = time.perf_counter()
        store._conn.execute(_GENERATE, {"now": now, "rows": rows})
        print(f"generated {rows:,} spans in {time.perf_counter() - started:.1f} s")
        for by in ("model", "session", "day"):
            times = []
            for _ in range(5):
                started = time.perf_counter()
                result = store.summary(by)  # type: ignore[arg-type]
                times.append(time.perf_counter() - started)
            print(f"summary by {by} over {rows:,} spans ({len(result)} rows): "
                  f"median {statistics.median(times) * 1000:.0f} ms")  # fmt: skip
        times = []
        for _ in range(5):
            started = time.perf_counter()
            found = store.spans(session_id="ses_7", since_ns=now - 86_400 * 10**9)
            times.append(time.perf_counter() - started)
        print(f"spans of one session over the last day ({len(found)}): "
              f"median {statistics.median(times) * 1000:.0f} ms")  # fmt: skip
    finally:
        store.shutdown()


async def _prompts(count: int, telemetry: TelemetryOptions | None) -> float:
    from bench.turn_overhead import echo_then_answer, scripted, tools
    from runtime import Location, Prompt, open_runtime

    directory = Path(tempfile.mkdtemp())
    options = {"telemetry": telemetry} if telemetry is not None else {}
    async with open_runtime(
        data_dir=directory, llm=scripted(echo_then_answer), tools=tools, **options
    ) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(directory)))).id
        for i in range(20):  # warm up
            await rt.sessions.prompt(sid, prompt=Prompt(text=f"warm {i}"))
            await rt.sessions.wait_idle(sid)
        started = time.process_time()
        for i in range(count):
            await rt.sessions.prompt(sid, prompt=Prompt(text=f"turn {i}"))
            await rt.sessions.wait_idle(sid)
        if rt.telemetry is not None:
            rt.telemetry.force_flush()
        return (time.process_time() - started) / count


def cpu_per_prompt(count: int, rounds: int) -> None:
    import trio

    modes = {
        "off": None, "on": TelemetryOptions(sample=1.0), "sampled 10%": TelemetryOptions(sample=0.1),
        "sampled 5% (default)": TelemetryOptions(sample=0.05),
        "sampled 0%": TelemetryOptions(sample=0.0),
    }  # fmt: skip
    results: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(rounds):
        for name, options in modes.items():
            results[name].append(trio.run(_prompts, count, options))
    off = statistics.median(results["off"])
    for name, values in results.items():
        median = statistics.median(values)
        runs = ", ".join(f"{v * 1000:.2f}" for v in values)
        print(f"CPU per prompt with a tool call, telemetry {name}: median {median * 1000:.2f} ms"
              f" ({(median / off - 1) * 100:+.0f}%; runs {runs})")  # fmt: skip


def cpu_pairs(count: int, pairs: int, sample: float) -> None:
    import trio

    on_options = TelemetryOptions(sample=sample)
    off: list[float] = []
    on: list[float] = []
    for pair in range(pairs):
        for telemetry in (None, on_options) if first_is_off(pair) else (on_options, None):
            (off if telemetry is None else on).append(trio.run(_prompts, count, telemetry))
    label = f"CPU per prompt with a tool call, telemetry off / sampled {sample:g}"
    print(pair_report(label, off, on, unit="ms", scale=1000), flush=True)
    print("  off runs:", ", ".join(f"{v * 1000:.2f}" for v in off))
    print("  on runs: ", ", ".join(f"{v * 1000:.2f}" for v in on))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--prompts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=0, help="off / --sample pairs instead")
    parser.add_argument("--sample", type=float, default=TelemetryOptions().sample)
    args = parser.parse_args()
    if args.spans:
        span_cpu(args.spans)
    if args.prompts and args.pairs:
        cpu_pairs(args.prompts, args.pairs, args.sample)
    elif args.prompts:
        cpu_per_prompt(args.prompts, args.rounds)
    if args.rows:
        summary_query(args.rows)


if __name__ == "__main__":
    main()
