"""Telemetry: the project's OpenTelemetry tracer and where its spans are recorded.

Instrument through the OpenTelemetry API::

    from runtime.telemetry import tracer

    with tracer.start_as_current_span("compaction", attributes={"session.id": sid}):
        ...

Spans are recorded only inside ``recording(processor)`` (a runtime opened with telemetry
on); elsewhere they are dropped by the sampler. A processor buffers finished spans
(``SpanBuffer``) and keeps whole traces once they end (``TailSampler``) on a thread of its
own. See ``docs/telemetry.md``.

``tracer``, ``SpanRecorder`` and ``RecordedSpan`` load on first use (PEP 562) with
OpenTelemetry's SDK, as ``recording`` loads them: a process with telemetry off never
imports the SDK.
"""

from __future__ import annotations

import typing as _typing

from runtime._lazy import lazy_attribute as _lazy_attribute
from runtime._sampling import SamplingCounts as SamplingCounts
from runtime._sampling import SpanBuffer as SpanBuffer
from runtime._sampling import TailSampler as TailSampler
from runtime._telemetry import TRACER_NAME as TRACER_NAME
from runtime._telemetry import active_processor as active_processor
from runtime._telemetry import child_span as child_span
from runtime._telemetry import current_span_context as current_span_context
from runtime._telemetry import recording as recording
from runtime._telemetry import records_text as records_text
from runtime._telemetry import span as span

if _typing.TYPE_CHECKING:
    from runtime._recorded import RecordedSpan as RecordedSpan
    from runtime._recorded import SpanRecorder as SpanRecorder
    from runtime._recorded import tracer as tracer

__all__ = [
    "RecordedSpan",
    "SamplingCounts",
    "SpanBuffer",
    "SpanRecorder",
    "TRACER_NAME",
    "TailSampler",
    "active_processor",
    "child_span",
    "current_span_context",
    "recording",
    "records_text",
    "span",
    "tracer",
]

_RECORDING = dict.fromkeys(("RecordedSpan", "SpanRecorder", "tracer"), "runtime._recorded")
"""The names of ``runtime._recorded``, which imports OpenTelemetry's SDK."""


def __getattr__(name: str) -> _typing.Any:
    return _lazy_attribute(__name__, _RECORDING, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_RECORDING})
