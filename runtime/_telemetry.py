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
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from random import getrandbits
from typing import Final

import trio
from opentelemetry import trace
from opentelemetry.context import Context, attach, detach
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, Tracer, TraceState
from opentelemetry.util.types import Attributes

TRACER_NAME: Final = "kittiwake"
_ROOT: Final = Context()
"""The empty context: a span started in it begins a new trace."""


class _Recording:
    """Where this context's spans go: the processor, text or not, and the sampled share."""

    __slots__ = ("processor", "record_text", "bound")

    def __init__(self, processor: SpanProcessor, record_text: bool, sample: float) -> None:
        self.processor = processor
        self.record_text = record_text
        self.bound = int(sample * (1 << 64))
        """A new trace is recorded when the low 64 bits of its id are below this."""


_current: contextvars.ContextVar[_Recording | None] = contextvars.ContextVar(
    "kittiwake_recording", default=None
)
_chosen: contextvars.ContextVar[bool] = contextvars.ContextVar("kittiwake_chosen", default=False)
"""Set while ``span(root=True)`` starts a trace it chose to record."""
_DROP: Final = SamplingResult(Decision.DROP)


class _WhereRecording(Sampler):
    """Record a span iff a processor is active in the starting task's context, and its
    trace is sampled: a child follows its parent, a new trace is kept for the configured
    share of trace ids (``recording(sample=...)``)."""

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
        if _chosen.get():  # ``span`` decided already: its trace is recorded
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
        where = _current.get()
        if where is None:
            return _DROP
        parent = trace.get_current_span(parent_context).get_span_context()
        if parent.is_valid:
            sampled = parent.trace_flags.sampled
        else:  # a new trace: kept by its trace id
            sampled = (trace_id & 0xFFFFFFFFFFFFFFFF) < where.bound
        if not sampled:
            return _DROP
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "KittiwakeWhereRecording"


class _Routing(SpanProcessor):
    """Hand each recorded span to the processor that was active when it started.

    The table is a plain dict: its single-key operations are atomic under the GIL, and a
    span ends once, so no lock is needed on the hot path.
    """

    def __init__(self) -> None:
        self._owner: dict[int, SpanProcessor] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        where = _current.get()
        if where is None:  # pragma: no cover - the sampler drops these
            return
        self._owner[span.context.span_id] = where.processor

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:  # pragma: no cover - an SDK span always has one
            return
        processor = self._owner.pop(context.span_id, None)
        if processor is not None:
            processor.on_end(span)

    def shutdown(self) -> None:
        self._owner.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_provider = TracerProvider(
    sampler=_WhereRecording(), resource=Resource.create({"service.name": TRACER_NAME})
)
_provider.add_span_processor(_Routing())

tracer: Tracer = _provider.get_tracer(TRACER_NAME)


@contextmanager
def recording(
    processor: SpanProcessor, *, record_text: bool = False, sample: float = 1.0
) -> Iterator[None]:
    """Record the spans started in this context (and tasks spawned from it) into *processor*.

    The processor's ``on_end`` is called on the thread that ends the span and must not
    block (queue the span, write it elsewhere); its ``on_start`` is not called. Leaving the
    block stops recording new spans; spans already started still reach *processor* when they
    end. Nothing is flushed here. *record_text* lets instrumentation add prompt and answer
    text (``records_text``). *sample* is the share of new traces recorded (1.0: all); a
    span in a trace that is not recorded costs a non-recording span and no processor call.
    """
    if not 0.0 <= sample <= 1.0:
        raise ValueError(f"sample must be between 0 and 1, got {sample}")
    token = _current.set(_Recording(processor, record_text, sample))
    try:
        yield
    finally:
        _current.reset(token)


def records_text() -> bool:
    """Whether spans started here may carry prompt and answer text."""
    where = _current.get()
    return where is not None and where.record_text


def span(
    name: str, attributes: Attributes = None, *, root: bool = False,
    links: Sequence[SpanContext] = (),
) -> AbstractContextManager[trace.Span]:  # fmt: skip
    """Run the block in a span named *name* (the current span for what it starts).

    When nothing records spans here it yields the invalid span at the cost of one
    context-variable read. *root* starts a new trace (linked to *links*) instead of a
    child of the current span; so does a span started where no span is current. A new
    trace is recorded or not here, once (``recording(sample=...)``): one not recorded
    costs a non-recording span its children see, and each child a context lookup.
    Cancellation (``trio.Cancelled``, alone or in groups) ends the span with
    ``kittiwake.outcome`` ``interrupted`` and its status unset; any other exception sets
    the error status with the exception's type and message. Both propagate.
    """
    return _SpanBlock(name, attributes, root, links)


class _SpanBlock:
    """The context manager ``span`` returns (a class: cheaper than a generator's)."""

    __slots__ = ("_name", "_attributes", "_root", "_links", "_token", "_span")

    def __init__(
        self, name: str, attributes: Attributes, root: bool, links: Sequence[SpanContext]
    ) -> None:
        self._name = name
        self._attributes = attributes
        self._root = root
        self._links = links
        self._token: contextvars.Token[Context] | None = None
        self._span: trace.Span | None = None

    def __enter__(self) -> trace.Span:
        where = _current.get()
        if where is None:
            return trace.INVALID_SPAN
        parent = trace.get_current_span()
        context = parent.get_span_context()
        if not self._root and context.is_valid:
            if not context.trace_flags.sampled:
                return parent  # a trace not recorded: its children cost nothing more
        elif getrandbits(64) >= where.bound:
            # A new trace, not recorded: a non-recording span its children see, and no
            # SDK span behind it.
            unsampled = SpanContext(getrandbits(128) or 1, getrandbits(64) or 1, is_remote=False)
            self._token = attach(trace.set_span_in_context(trace.NonRecordingSpan(unsampled)))
            return trace.INVALID_SPAN
        links = self._links
        chosen = _chosen.set(True)  # the sampler records it without deciding again
        try:
            current = tracer.start_span(
                self._name, context=_ROOT if self._root else None, attributes=self._attributes,
                links=[Link(c) for c in links if c.is_valid] if links else None,
            )  # fmt: skip
        finally:
            _chosen.reset(chosen)
        self._span = current
        self._token = attach(trace.set_span_in_context(current))
        return current

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        current, token = self._span, self._token
        if current is not None and exc is not None:
            if _cancelled(exc):
                current.set_attribute("kittiwake.outcome", "interrupted")
            else:
                current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        if token is not None:
            detach(token)
        if current is not None:
            current.end()


def current_span_context() -> SpanContext | None:
    """The current span's context when spans are recorded here and the current span is
    recorded (its trace sampled), else None."""
    if _current.get() is None:
        return None
    context = trace.get_current_span().get_span_context()
    return context if context.is_valid and context.trace_flags.sampled else None


def _cancelled(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_cancelled(inner) for inner in exc.exceptions)
    return isinstance(exc, trio.Cancelled)


def active_processor() -> SpanProcessor | None:
    """The processor spans started here would reach, or None when nothing is recorded."""
    where = _current.get()
    return None if where is None else where.processor
