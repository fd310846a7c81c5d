"""Telemetry's options and names, and the event store's ``storage.batch`` spans: what the
store and the configuration need whether telemetry is on or off, without OpenTelemetry's
SDK (the tables themselves, ``TelemetryStore``, are ``storage._telemetry``'s).
"""

from __future__ import annotations

import time
from typing import Final, Literal

import msgspec
from opentelemetry.trace import Span as ApiSpan
from opentelemetry.trace import Status, StatusCode

from runtime.telemetry import child_span

__all__ = [
    "TELEMETRY_FILE",
    "TEXT_ATTRIBUTES",
    "SummaryKey",
    "TelemetryOptions",
    "batch_span",
    "end_batch_span",
]

TELEMETRY_FILE: Final = "telemetry.duckdb"
TEXT_ATTRIBUTES: Final = frozenset({"kittiwake.prompt", "kittiwake.answer"})
"""Attributes holding prompt or answer text: kept only with ``record_text``."""
SummaryKey = Literal["model", "session", "day"]


class TelemetryOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how long spans are kept (``telemetry`` in ``kittiwake.json``)."""

    retention_days: float = 7.0
    """Spans that ended longer ago than this are deleted."""
    max_bytes: int = 256 * 1024 * 1024
    """The oldest spans are deleted while the tables take more than this."""
    record_text: bool = False
    """Whether prompt and answer text attributes are kept (``TEXT_ATTRIBUTES``)."""
    flush_interval: float = 5.0
    """Seconds finished spans gather before the writer samples and writes them: fewer,
    larger transactions (a write costs some 3 ms of CPU whatever its size). The queries
    write what is buffered first."""
    batch_max: int = 4096
    """Buffered spans that start the writer at once, gathering or not."""
    buffer_max: int = 16_384
    """Finished spans the buffer holds for the writer; a span finished while it is full
    is dropped and counted (``dropped``, ``buffer_full``). Nothing blocks the thread that
    ends a span, and the span objects it holds are what this bounds (some 1-2 KB each)."""
    pending_max: int = 16_384
    """Spans held for traces whose root span has not ended yet; past it the oldest such
    trace is decided without its root (kept when it has an error, or by the draw)."""
    retention_every: float = 300.0
    """Seconds between retention sweeps."""
    sample: float = 0.05
    """The share of the traces that neither failed nor were slow kept (a drain's, a
    request's): every trace is recorded, and one with an error or whose root took longer
    than the running p95 of its name is always kept (tail sampling, ``TailSampler``); 1.0
    keeps all. The summary's turns, tokens, cost and errors count every turn whatever it
    is (they come from the events); its percentiles come from the kept traces."""
    otlp_endpoint: str | None = None
    """An OTLP/HTTP traces endpoint (``http://host:4318/v1/traces``) that also gets the spans."""
    otlp_headers: dict[str, str] = {}
    """Headers sent with each OTLP export (e.g. an authorization token)."""


def batch_span(operations: int, events: int) -> ApiSpan | None:
    """A ``storage.batch`` span started now under the current span, or None when that
    is not recorded here."""
    return child_span(
        "storage.batch",
        {"kittiwake.storage.operations": operations, "kittiwake.storage.events": events},
    )


def end_batch_span(
    span: ApiSpan | None, started: float, journaled: float | None = None, *,
    fsync_ms: float | None = None, error: BaseException | None = None,
) -> None:  # fmt: skip
    """End *span* (from ``batch_span``) with its journal write, fdatasync and commit times
    (``started`` and ``journaled`` are ``perf_counter`` readings); any thread may call it."""
    if span is None:
        return
    figures = {"kittiwake.storage.commit_ms": round((time.perf_counter() - started) * 1e3, 3)}
    if journaled is not None:
        figures["kittiwake.storage.journal_ms"] = round((journaled - started) * 1e3, 3)
    if fsync_ms is not None:
        figures["kittiwake.storage.fsync_ms"] = round(fsync_ms, 3)
    span.set_attributes(figures)  # one call: the SDK takes its lock once
    if error is not None:
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.end()
