"""Kittiwake's tracer: OpenTelemetry spans, recorded only where a runtime asks for them.

``tracer`` is an OpenTelemetry API ``Tracer`` of Kittiwake's own SDK ``TracerProvider``
(the process-global provider stays the embedding program's). A span is recorded only when it
starts inside ``recording(processor)``: the processor (any SDK ``SpanProcessor``) is held in
a context variable, so trio tasks spawned inside inherit it and two runtimes in one process
keep their spans apart. Outside it the sampler drops the span, which then costs one
non-recording span object and no processor call.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import trio
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, Tracer, TraceState
from opentelemetry.util.types import Attributes

TRACER_NAME = "kittiwake"

_current: contextvars.ContextVar[SpanProcessor | None] = contextvars.ContextVar(
    "kittiwake_span_processor", default=None
)
_text: contextvars.ContextVar[bool] = contextvars.ContextVar("kittiwake_record_text", default=False)


class _WhereRecording(Sampler):
    """Record a span iff a processor is active in the starting task's context."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        if _current.get() is None:
            return SamplingResult(Decision.DROP)
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "KittiwakeWhereRecording"


class _Routing(SpanProcessor):
    """Hand each recorded span to the processor that was active when it started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: dict[int, SpanProcessor] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        processor = _current.get()
        if processor is None:  # pragma: no cover - the sampler drops these
            return
        with self._lock:
            self._owner[span.context.span_id] = processor
        processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:  # pragma: no cover - an SDK span always has one
            return
        with self._lock:
            processor = self._owner.pop(context.span_id, None)
        if processor is not None:
            processor.on_end(span)

    def shutdown(self) -> None:
        with self._lock:
            self._owner.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_provider = TracerProvider(
    sampler=_WhereRecording(), resource=Resource.create({"service.name": TRACER_NAME})
)
_provider.add_span_processor(_Routing())

tracer: Tracer = _provider.get_tracer(TRACER_NAME)


@contextmanager
def recording(processor: SpanProcessor, *, record_text: bool = False) -> Iterator[None]:
    """Record the spans started in this context (and tasks spawned from it) into *processor*.

    The processor's ``on_end`` is called on the thread that ends the span and must not
    block (queue the span, write it elsewhere). Leaving the block stops recording new spans;
    spans already started still reach *processor* when they end. Nothing is flushed here.
    *record_text* lets instrumentation add prompt and answer text (``records_text``).
    """
    token, text = _current.set(processor), _text.set(record_text)
    try:
        yield
    finally:
        _text.reset(text)
        _current.reset(token)


def records_text() -> bool:
    """Whether spans started here may carry prompt and answer text."""
    return _current.get() is not None and _text.get()


@contextmanager
def span(
    name: str, attributes: Attributes = None, *, root: bool = False,
    links: Sequence[SpanContext] = (),
) -> Iterator[trace.Span]:  # fmt: skip
    """Run the block in a span named *name* (the current span for what it starts).

    When nothing records spans here it yields the invalid span at the cost of one
    context-variable read. *root* starts a new trace (linked to *links*) instead of a
    child of the current span. Cancellation (``trio.Cancelled``, alone or in groups) ends
    the span with ``kittiwake.outcome`` ``interrupted`` and its status unset; any other
    exception sets the error status with the exception's type and message. Both propagate.
    """
    if _current.get() is None:
        yield trace.INVALID_SPAN
        return
    with tracer.start_as_current_span(
        name, context=Context() if root else None, attributes=attributes,
        links=[Link(c) for c in links if c.is_valid], record_exception=False,
        set_status_on_exception=False,
    ) as current:  # fmt: skip
        try:
            yield current
        except BaseException as exc:
            if _cancelled(exc):
                current.set_attribute("kittiwake.outcome", "interrupted")
            else:
                current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise


def current_span_context() -> SpanContext | None:
    """The current span's context when spans are recorded here and one is open, else None."""
    if _current.get() is None:
        return None
    context = trace.get_current_span().get_span_context()
    return context if context.is_valid else None


def _cancelled(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_cancelled(inner) for inner in exc.exceptions)
    return isinstance(exc, trio.Cancelled)


def active_processor() -> SpanProcessor | None:
    """The processor spans started here would reach, or None when nothing is recorded."""
    return _current.get()
