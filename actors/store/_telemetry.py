"""A runtime's telemetry: its span tables, and an OTLP exporter beside them when configured."""

from __future__ import annotations

from pathlib import Path

import trio
from opentelemetry.sdk.trace import SpanProcessor, SynchronousMultiSpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from storage import TelemetryOptions, TelemetryStore

__all__ = ["open_telemetry"]


async def open_telemetry(
    directory: Path, options: TelemetryOptions
) -> tuple[TelemetryStore, SpanProcessor]:
    """Open the telemetry tables of *directory* (in a worker thread) and return them with the
    processor spans go to: the tables, plus OpenTelemetry's OTLP/HTTP exporter behind a batch
    processor when ``options.otlp_endpoint`` is set. Shut the processor down to flush.

    Raises duckdb.Error when the telemetry file cannot be opened; cancellation waits for the
    opening thread.
    """
    store = await trio.to_thread.run_sync(TelemetryStore.open, directory, options)
    if options.otlp_endpoint is None:
        return store, store
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=options.otlp_endpoint, headers=options.otlp_headers)
    both = SynchronousMultiSpanProcessor()
    both.add_span_processor(store)
    both.add_span_processor(BatchSpanProcessor(exporter))
    return store, both
