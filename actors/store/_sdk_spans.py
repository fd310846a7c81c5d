"""The telemetry tables as a plain SDK ``SpanProcessor``, for an OTLP exporter beside them
(imported only then: ``open_telemetry``)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from storage import TelemetryStore

__all__ = ["SdkSpans"]


class SdkSpans(SpanProcessor):
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
