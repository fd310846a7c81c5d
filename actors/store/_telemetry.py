"""A runtime's telemetry: its span tables, and an OTLP exporter beside them when configured.

OpenTelemetry's SDK and the tables' module load when ``open_telemetry`` runs (telemetry on).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import trio

from storage import TelemetryOptions

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

    from storage import TelemetryStore

__all__ = ["open_telemetry"]


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
    from storage import TelemetryStore

    if options.otlp_endpoint is None:
        store = await trio.to_thread.run_sync(TelemetryStore.open, directory, options)
        return store, store
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from actors.store._sdk_spans import SdkSpans

    exporter = OTLPSpanExporter(endpoint=options.otlp_endpoint, headers=options.otlp_headers)
    export = BatchSpanProcessor(exporter)
    try:
        store = await trio.to_thread.run_sync(TelemetryStore.open, directory, options, export)
    except BaseException:
        export.shutdown()  # its thread
        raise
    return store, SdkSpans(store)
