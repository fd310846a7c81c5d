"""A runtime's telemetry: its span tables, and an OTLP exporter beside them when configured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from storage import TelemetryOptions, TelemetryStore

__all__ = ["open_telemetry"]


class _SdkSpans(SpanProcessor):
    """The tables as a plain SDK ``SpanProcessor`` (not a ``SpanRecorder``), so that spans
    reach them as the SDK's, which the OTLP exporter encodes: the tables sample them and
    hand the kept ones to the exporter."""

    def __init__(self, store: TelemetryStore) -> None:
        self._store = store

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self._store.on_end(span)

    def shutdown(self) -> None:
        self._store.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._store.force_flush(timeout_millis)


async def open_telemetry(
    directory: Path, options: TelemetryOptions
) -> tuple[TelemetryStore, SpanProcessor]:
    """Open the telemetry tables of *directory* (in a worker thread) and return them with the
    processor spans go to: the tables themselves, or, when ``options.otlp_endpoint`` is
    set, the tables taking SDK spans and handing the traces they keep to OpenTelemetry's
    OTLP/HTTP exporter behind its batch processor. Shut the processor down to flush.

    Raises duckdb.Error when the telemetry file cannot be opened; cancellation waits for the
    opening thread.
    """
    if options.otlp_endpoint is None:
        store = await trio.to_thread.run_sync(TelemetryStore.open, directory, options)
        return store, store
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter = OTLPSpanExporter(endpoint=options.otlp_endpoint, headers=options.otlp_headers)
    export = BatchSpanProcessor(exporter)
    try:
        store = await trio.to_thread.run_sync(TelemetryStore.open, directory, options, export)
    except BaseException:
        export.shutdown()  # its thread
        raise
    return store, _SdkSpans(store)
