"""Telemetry tables: finished spans written in batches to ``telemetry.duckdb``, off the hot path.

:class:`TelemetryStore` is an OpenTelemetry SDK ``SpanProcessor`` (a ``SpanRecorder``: the
spans of ``runtime.telemetry.span`` reach it without the SDK's span objects). ``on_end`` and
``record`` only append the finished span to a bounded buffer (``SpanBuffer``: dropped and
counted when ``buffer_max`` spans already wait). A worker thread takes what gathered over
``flush_interval`` (or ``batch_max`` spans at once), keeps whole traces by tail sampling
(``TailSampler``: every trace with an error, every root slower than the running p95 of its
name, ``sample`` of the rest), encodes the kept spans' rows and inserts them in one DuckDB
transaction on the telemetry file's own connection (and hands them to an exporter, when
one is given). The file is separate from the event store's database and the journal:
telemetry is never journaled, a killed process loses at most the spans not yet flushed,
and nothing here can hold up or damage an event write.

Retention runs on the same thread at open and every ``retention_every`` seconds: spans older
than ``retention_days`` go, then the oldest ones until the data fits ``max_bytes``.
Queries (:meth:`TelemetryStore.spans`, :meth:`TelemetryStore.summary`) are DuckDB SQL on a
cursor of their own, after the spans still queued are written; call them from a worker
thread.

This module imports OpenTelemetry's SDK (a ``SpanRecorder`` is an SDK ``SpanProcessor``):
``storage`` names ``TelemetryStore`` on first use (PEP 562), and the options, file name and
the store's batch spans are in ``storage._telemetry_options``, so a process with telemetry
off never imports it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Final

import duckdb
import msgspec
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanKind, StatusCode

from runtime.telemetry import RecordedSpan, SpanBuffer, SpanRecorder, TailSampler
from storage._telemetry_options import (
    TELEMETRY_FILE,
    TEXT_ATTRIBUTES,
    SummaryKey,
    TelemetryOptions,
)
from storage._worker import Worker

__all__ = ["TelemetryStore"]

_log = logging.getLogger("kittiwake.telemetry")
_NS_PER_DAY: Final = 86_400 * 10**9
_QUERY_FLUSH_MS: Final = 5_000
"""How long a query waits for the queued spans to be written before it reads without them."""

_SCHEMA: Final = """
create table if not exists spans (
    trace_id varchar not null,
    span_id varchar not null,
    parent_id varchar,
    name varchar not null,
    kind varchar not null,
    start_ns bigint not null,
    end_ns bigint not null,
    duration_ms double not null,
    status varchar not null,
    status_message varchar,
    session_id varchar,
    provider varchar,
    model varchar,
    tokens_in bigint,
    tokens_out bigint,
    tokens_cached bigint,
    cost double,
    ttft_ms double,
    attributes varchar,
    events varchar,
    links varchar
)
"""
_COLUMNS: Final = (
    ("trace_id", "varchar"), ("span_id", "varchar"), ("parent_id", "varchar"),
    ("name", "varchar"), ("kind", "varchar"), ("start_ns", "bigint"), ("end_ns", "bigint"),
    ("duration_ms", "double"), ("status", "varchar"), ("status_message", "varchar"),
    ("session_id", "varchar"), ("provider", "varchar"), ("model", "varchar"),
    ("tokens_in", "bigint"), ("tokens_out", "bigint"), ("tokens_cached", "bigint"),
    ("cost", "double"), ("ttft_ms", "double"), ("attributes", "varchar"),
    ("events", "varchar"), ("links", "varchar"),
)  # fmt: skip
_BATCH_FILE: Final = "telemetry.batch.json"
"""The batch being written, as a JSON array DuckDB's reader parses (rewritten each time)."""
_READ_TYPES: Final = {"attributes": "json", "events": "json", "links": "json"}
_INSERT: Final = (
    "insert into spans by name select * from read_json(?, format = 'array', columns = {"
    + ", ".join(f"'{name}': '{_READ_TYPES.get(name, kind)}'" for name, kind in _COLUMNS)
    + "})"
)
# Span attributes copied to columns of their own (what the summaries group and sum).
_COLUMN_ATTRIBUTES: Final = (
    ("session_id", "session.id"), ("provider", "gen_ai.provider.name"),
    ("model", "gen_ai.request.model"), ("tokens_in", "gen_ai.usage.input_tokens"),
    ("tokens_out", "gen_ai.usage.output_tokens"), ("tokens_cached", "kittiwake.tokens.cached"),
    ("cost", "kittiwake.cost"), ("ttft_ms", "kittiwake.ttft_ms"),
)  # fmt: skip
_COLUMN_OF: Final = {name: column for column, name in _COLUMN_ATTRIBUTES}


class TelemetryStore(SpanRecorder):
    """The telemetry tables of one data directory; see the module docstring."""

    def __init__(
        self, conn: duckdb.DuckDBPyConnection, options: TelemetryOptions, directory: Path,
        export: SpanProcessor | None = None,
    ) -> None:  # fmt: skip
        self._conn = conn
        self._batch = directory / _BATCH_FILE
        self.options = options
        self.written = 0
        self.failed = 0
        """Spans kept but lost: their row could not be encoded or written (logged)."""
        self.late = 0
        """Spans that ended after the store was shut down."""
        self.flushes = 0
        self.last_flush_ms = 0.0
        self._last_retention = time.monotonic()
        self._closed = False
        self._close_lock = threading.Lock()
        self._export = export
        self._p95_ms: dict[str, float] = {}
        """The sampler's running p95 by root name (ms), as of the latest flush."""
        self._buffer: SpanBuffer[ReadableSpan | RecordedSpan] = SpanBuffer(options.buffer_max)
        self._sampler: TailSampler[ReadableSpan | RecordedSpan] = TailSampler(
            options.sample, pending_max=options.pending_max
        )
        # The worker's queue holds wake-ups (the buffer's first span, its batch_max-th)
        # and force_flush's events; the second item in it ends the linger.
        self._worker: Worker[None | threading.Event] = Worker(
            self._flush, name="kittiwake-telemetry", linger=options.flush_interval,
            max_backlog=2,
        )  # fmt: skip

    @classmethod
    def open(
        cls, directory: Path | str, options: TelemetryOptions | None = None,
        export: SpanProcessor | None = None,
    ) -> TelemetryStore:  # fmt: skip
        """Open (creating if needed) ``telemetry.duckdb`` in *directory* and sweep retention.
        The kept spans also go to *export*'s ``on_end`` (from the writer thread; SDK spans
        only reach it when the store is used as a plain ``SpanProcessor``, see
        ``actors/store/_telemetry.py``); the store shuts it down with itself.

        Raises duckdb.Error when the file cannot be opened (held by another process, or
        not a DuckDB file).
        """
        options = options or TelemetryOptions()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        # One thread: the writer's. DuckDB's asynchronous I/O pool (four threads per CPU,
        # started at connect) serves only Parquet and CSV scans, which these tables never run.
        conn = duckdb.connect(
            str(directory / TELEMETRY_FILE), config={"threads": 1, "async_threads": 0}
        )
        try:
            conn.execute(_SCHEMA)
            conn.execute("create index if not exists spans_trace on spans (trace_id)")
            store = cls(conn, options, directory, export)
            store.retain()
        except BaseException:
            conn.close()
            raise
        return store

    # -- the SpanProcessor side (any thread) ---------------------------------------------

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        """Buffer *span* for the writer; drop it (counted) when the buffer is full."""
        self.record(span)

    def record(self, span: ReadableSpan | RecordedSpan) -> None:
        """Buffer *span* (an SDK span or one of ``runtime.telemetry.span``'s) for the
        writer, which samples, encodes and writes it: all this thread does is append it,
        waking the writer for the buffer's first span and its ``batch_max``-th. Drops it
        (counted in ``buffer_full``) when ``buffer_max`` spans already wait."""
        if self._closed:
            self.late += 1
            return
        waiting = self._buffer.append(span)
        if waiting == 1 or waiting == self.options.batch_max:
            self._worker.submit(None)

    @property
    def dropped(self) -> int:
        """Spans lost: the buffer was full, their row failed, or they ended too late."""
        return self._buffer.dropped + self.failed + self.late

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Sample and write every span that ended before this call (the spans of traces
        whose root has not ended wait for it); False when that did not finish within the
        timeout (or the writer stopped)."""
        if self._closed:
            return True
        if self._worker.error is not None:
            return False
        written = threading.Event()
        worker = self._worker
        worker.submit(written)
        with worker.cond:
            worker.hurry()
        return written.wait(timeout_millis / 1000) and worker.error is None

    def shutdown(self) -> None:
        """Sample and write what is buffered, deciding the traces whose root has not ended
        on their errors and ids; stop the thread, shut the exporter down (it exports what
        it holds) and close the file (waits for all of it)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._worker.stop()
        if self._worker.error is None:  # the thread is gone: its state is this one's
            self._keep(self._sampler.offer(self._buffer.take()) + self._sampler.flush())
        if self._export is not None:
            self._export.shutdown()
        self._conn.close()

    close = shutdown

    # -- the writer thread ----------------------------------------------------------------

    def _flush(self, work: list[None | threading.Event]) -> None:
        self._keep(self._sampler.offer(self._buffer.take()))
        self._p95_ms = {name: ns / 1e6 for name, ns in self._sampler.p95s().items()}
        for item in work:
            if isinstance(item, threading.Event):
                item.set()

    def _keep(self, spans: list[ReadableSpan | RecordedSpan]) -> None:
        """Encode and write the rows of the kept *spans*, and export them."""
        if not spans:
            return
        rows: list[bytes] = []
        record_text = self.options.record_text
        for span in spans:
            try:
                rows.append(_encode(_row(span, record_text=record_text)))
            except Exception:  # noqa: BLE001 - telemetry never stops the runtime; logged
                _log.exception("could not encode the span %r", span.name)
                self.failed += 1
        if rows:
            self._write(rows)
        export = self._export
        if export is not None:
            for span in spans:
                if isinstance(span, ReadableSpan):
                    export.on_end(span)

    def _write(self, rows: list[bytes]) -> None:
        started = time.perf_counter()
        try:
            self._batch.write_bytes(b"[" + b",".join(rows) + b"]")
            self._conn.execute("begin")
            try:
                self._conn.execute(_INSERT, [str(self._batch)])
                self._conn.execute("commit")
            except BaseException:
                self._conn.execute("rollback")
                raise
            self.written += len(rows)
        except Exception:  # noqa: BLE001 - telemetry never stops the runtime; logged
            _log.exception("could not write %d spans", len(rows))
            self.failed += len(rows)
        self.flushes += 1
        self.last_flush_ms = (time.perf_counter() - started) * 1000
        if time.monotonic() - self._last_retention >= self.options.retention_every:
            try:
                self.retain()
            except Exception:  # noqa: BLE001 - retried at the next sweep
                _log.exception("telemetry retention failed")

    def retain(self, now_ns: int | None = None) -> int:
        """Delete spans past ``retention_days``, then the oldest while the tables are over
        ``max_bytes``; return how many went. Runs on the writer thread (or before it
        starts); the deletion is one transaction."""
        self._last_retention = time.monotonic()
        now_ns = time.time_ns() if now_ns is None else now_ns
        cutoff = now_ns - int(self.options.retention_days * _NS_PER_DAY)
        conn = self._conn
        before = _count(conn)
        conn.execute("delete from spans where end_ns < ?", [cutoff])
        conn.execute("checkpoint")  # the blocks in use, not what the write-ahead log holds
        used = self.used_bytes()
        if used > self.options.max_bytes:
            remaining = _count(conn)
            keep = int(remaining * self.options.max_bytes / used * 0.8)
            conn.execute(
                "delete from spans where span_id in (select span_id from spans"
                " order by start_ns desc offset ?)",
                [keep],
            )
            conn.execute("checkpoint")
        return before - _count(conn)

    def used_bytes(self) -> int:
        """Bytes of the blocks the telemetry file uses (what ``max_bytes`` bounds)."""
        row = self._conn.execute("select block_size, used_blocks from pragma_database_size()")
        block_size, used_blocks = row.fetchone() or (0, 0)
        return int(block_size) * int(used_blocks)

    # -- queries (call from a worker thread) ---------------------------------------------

    def spans(
        self, *, session_id: str | None = None, trace_id: str | None = None,
        since_ns: int | None = None, limit: int = 5000,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Stored spans, oldest first: those of the traces that touch *session_id* (every
        span of such a trace, storage batches included), of *trace_id*, started at or
        after *since_ns*; at most *limit*. Spans ended before the call are written first."""
        self.force_flush(_QUERY_FLUSH_MS)
        where, params = ["start_ns >= ?"], list[Any]([since_ns or 0])
        if session_id is not None:
            where.append("trace_id in (select distinct trace_id from spans where session_id = ?)")
            params.append(session_id)
        if trace_id is not None:
            where.append("trace_id = ?")
            params.append(trace_id)
        sql = f"select * from spans where {' and '.join(where)} order by start_ns, span_id limit ?"
        cursor = self._conn.cursor()
        try:
            result = cursor.execute(sql, [*params, limit])
            names = [d[0] for d in result.description]
            rows = result.fetchall()
        finally:
            cursor.close()
        return [_span_json(dict(zip(names, row, strict=True))) for row in rows]

    def summary(self, by: SummaryKey, *, since_ns: int | None = None) -> list[dict[str, Any]]:
        """Per model, session or day (UTC): provider turns, tokens, cost, errors, and the
        p50/p95/p99 of time to first token and of turn, tool and commit durations (ms).

        A tool or storage span counts under the model of the turn it ran in (its parent)
        and under the session of its trace. Spans ended before the call are written first.
        """
        self.force_flush(_QUERY_FLUSH_MS)
        key, join = {
            "model": (
                "coalesce(s.model, p.model)",
                "left join spans p on p.span_id = s.parent_id and p.trace_id = s.trace_id",
            ),
            "session": (
                "coalesce(s.session_id, t.session_id)",
                "left join (select trace_id, max(session_id) as session_id from spans"
                " where start_ns >= $since group by trace_id) t on t.trace_id = s.trace_id",
            ),
            "day": ("strftime(make_timestamp(s.start_ns // 1000), '%Y-%m-%d')", ""),
        }[by]
        sql = f"""
        with keyed as (
            select {key} as key, s.name, s.status, s.tokens_in, s.tokens_out,
                   s.tokens_cached, s.cost, s.ttft_ms, s.duration_ms
            from spans s {join} where s.start_ns >= $since
        )
        select key,
            count(*) filter (where name = 'provider.turn') as turns,
            coalesce(sum(tokens_in), 0) as tokens_in,
            coalesce(sum(tokens_out), 0) as tokens_out,
            coalesce(sum(tokens_cached), 0) as tokens_cached,
            coalesce(sum(cost), 0) as cost,
            count(*) filter (where status = 'error') as errors,
            quantile_cont(ttft_ms, [0.5, 0.95, 0.99]) filter (where name = 'provider.turn') as ttft_ms,
            quantile_cont(duration_ms, [0.5, 0.95, 0.99]) filter (where name = 'provider.turn') as turn_ms,
            quantile_cont(duration_ms, [0.5, 0.95, 0.99]) filter (where name = 'tool') as tool_ms,
            quantile_cont(duration_ms, [0.5, 0.95, 0.99]) filter (where name = 'storage.batch') as commit_ms
        from keyed group by key order by key nulls last
        """
        cursor = self._conn.cursor()
        try:
            result = cursor.execute(sql, {"since": since_ns or 0})
            names = [d[0] for d in result.description]
            rows = result.fetchall()
        finally:
            cursor.close()
        return [_summary_json(dict(zip(names, row, strict=True))) for row in rows]

    def errors(self, *, limit: int = 20) -> list[dict[str, Any]]:
        """The latest spans that ended in error, newest first: name, session, message, when
        (spans ended before the call are written first)."""
        self.force_flush(_QUERY_FLUSH_MS)
        cursor = self._conn.cursor()
        try:
            rows = cursor.execute(
                "select s.name, coalesce(s.session_id, (select max(t.session_id) from spans t"
                " where t.trace_id = s.trace_id)), s.status_message, s.end_ns, s.trace_id"
                " from spans s where s.status = 'error' order by s.end_ns desc limit ?",
                [limit],
            ).fetchall()
        finally:
            cursor.close()
        names = ("name", "session_id", "message", "end_ns", "trace_id")
        return [dict(zip(names, row, strict=True)) for row in rows]

    def statistics(self) -> dict[str, Any]:
        """What was written and dropped (of it, for a full buffer), the spans buffered and
        those waiting for their trace's root, the sampler's decisions (traces), the
        running p95 by root name over which a trace counts as slow, and the last write's
        time."""
        return {
            "written": self.written, "dropped": self.dropped,
            "buffer_full": self._buffer.dropped, "queued": len(self._buffer),
            "pending": self._sampler.pending, "traces": self._sampler.counts.as_dict(),
            "p95_ms": {name: round(ms, 3) for name, ms in self._p95_ms.items()},
            "flushes": self.flushes, "last_flush_ms": round(self.last_flush_ms, 2),
        }  # fmt: skip


def _count(conn: duckdb.DuckDBPyConnection) -> int:
    row = conn.execute("select count(*) from spans").fetchone()
    return int(row[0]) if row else 0


_encode = msgspec.json.Encoder().encode
_STATUS: Final = {StatusCode.ERROR: "error", StatusCode.OK: "ok", StatusCode.UNSET: "unset"}
_KINDS: Final = {kind: kind.name.lower() for kind in SpanKind}


def _row(span: ReadableSpan | RecordedSpan, *, record_text: bool) -> dict[str, Any]:
    """*span* as a row object of the columns of ``_COLUMNS`` (a column left out, as NULL
    ones are, reads as NULL): the write parses a JSON array of them."""
    context, parent, status = span.context, span.parent, span.status
    attributes: Any = span.attributes or {}
    if type(attributes) is not dict:  # the SDK's BoundedAttributes
        attributes = dict(attributes)
    if not record_text and not TEXT_ATTRIBUTES.isdisjoint(attributes):
        attributes = {k: v for k, v in attributes.items() if k not in TEXT_ATTRIBUTES}
    start = span.start_time or 0
    end = span.end_time or start
    kind, code = span.kind, status.status_code  # enums: compared by identity, not hashed
    row: dict[str, Any] = {
        "name": span.name, "kind": "internal" if kind is SpanKind.INTERNAL else _KINDS[kind],
        "start_ns": start, "end_ns": end, "duration_ms": (end - start) / 1e6,
        "status": "unset" if code is StatusCode.UNSET else _STATUS[code],
    }  # fmt: skip
    if context is not None:
        row["trace_id"] = f"{context.trace_id:032x}"
        row["span_id"] = f"{context.span_id:016x}"
    else:  # pragma: no cover - an SDK span always has a context
        row["trace_id"] = row["span_id"] = ""
    if parent is not None:
        row["parent_id"] = f"{parent.span_id:016x}"
    if status.description is not None:
        row["status_message"] = status.description
    if attributes:
        row["attributes"] = attributes
        for name in _COLUMN_OF.keys() & attributes.keys():
            value = attributes[name]
            if value is not None:
                row[_COLUMN_OF[name]] = value
    events, links = span.events, span.links
    if events:
        row["events"] = [
            {"name": e.name, "time_ns": e.timestamp, **dict(e.attributes or ())} for e in events
        ]
    if links:
        row["links"] = [
            {"trace_id": f"{link.context.trace_id:032x}", "span_id": f"{link.context.span_id:016x}"}
            for link in links
        ]  # fmt: skip
    return row


def _span_json(row: dict[str, Any]) -> dict[str, Any]:
    for key in ("attributes", "events", "links"):
        row[key] = json.loads(row[key]) if row[key] else ({} if key == "attributes" else [])
    row["duration_ms"] = round(row["duration_ms"], 3)
    return row


def _summary_json(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if not k.endswith("_ms")}
    out["cost"] = round(float(out["cost"]), 6)
    for name in ("ttft_ms", "turn_ms", "tool_ms", "commit_ms"):
        values = row[name]
        quantiles = values if values else [None, None, None]
        for q, value in zip(("p50", "p95", "p99"), quantiles, strict=True):
            out[f"{name[:-3]}_{q}_ms"] = None if value is None else round(float(value), 2)
    return out
