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
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from random import getrandbits
from time import time_ns
from typing import Final

import trio
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context, attach, detach, get_current
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import (
    Event,
    ReadableSpan,
    Span,
    SpanLimits,
    SpanProcessor,
    TracerProvider,
)
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import (
    Link,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
    TraceState,
)
from opentelemetry.util.types import AnyValue, Attributes

TRACER_NAME: Final = "kittiwake"
_ROOT: Final = Context()
"""The empty context: a span started in it begins a new trace."""


class _Recording:
    """Where this context's spans go: the processor, and text or not."""

    __slots__ = ("processor", "record_text", "sink")

    def __init__(self, processor: SpanProcessor, record_text: bool) -> None:
        self.processor = processor
        self.record_text = record_text
        self.sink: Callable[[RecordedSpan], None] | None = (
            processor.record if isinstance(processor, SpanRecorder) else None
        )
        """Where ``span`` hands its recorded spans without the SDK's span objects."""


_current: contextvars.ContextVar[_Recording | None] = contextvars.ContextVar(
    "kittiwake_recording", default=None
)
_chosen: contextvars.ContextVar[bool] = contextvars.ContextVar("kittiwake_chosen", default=False)
"""Set while ``span(root=True)`` starts a trace it chose to record."""
_DROP: Final = SamplingResult(Decision.DROP)
_Attached = tuple[Context, trace.Span, SpanContext | None]
_attached: contextvars.ContextVar[_Attached | None] = contextvars.ContextVar(
    "kittiwake_attached", default=None
)
"""The context ``span`` attached last here, with its span (valid) and that span's context
when it is recorded: while that context is still OpenTelemetry's current one, its span is
the current span, known without the API's lookup."""


class _WhereRecording(Sampler):
    """Record a span iff a processor is active in the starting task's context: every new
    trace, and a child whose parent is recorded (which traces are kept is the processor's
    choice once they end, e.g. ``TailSampler``)."""

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
        if parent.is_valid and not parent.trace_flags.sampled:
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


class SpanRecorder(SpanProcessor, ABC):
    """A span processor that also takes the spans of ``span`` and ``child_span`` as they
    are, without the SDK's span objects: inside ``recording`` they reach :meth:`record`
    (on the thread that ends the span, which must not block). Spans started through
    ``tracer`` still reach ``on_end`` as SDK spans."""

    @abstractmethod
    def record(self, span: RecordedSpan) -> None:
        """Take *span*, ended (read it like an SDK ``ReadableSpan``)."""


_LIMITS: Final = SpanLimits()
"""The SDK's default limits (or the ``OTEL_*_LIMIT`` environment's), as its spans get them."""
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_NO_STATE: Final = TraceState()
_UNSET: Final = Status(StatusCode.UNSET)
_PLAIN: Final = frozenset({str, int, float, bool})
_KEYS: Final = frozenset({str})
_MAX_ATTRIBUTES: Final = _LIMITS.max_span_attributes
_AS_GIVEN: Final = _LIMITS.max_attribute_length is None
"""Whether plain values are kept as they are (no string length limit is set)."""


def _plain(attributes: Mapping[str, AnyValue], count: int) -> bool:
    """Whether *attributes* are kept as they are by the SDK (checked in C, no Python
    loop): plain values under string keys, *count* (those and the span's) within the limit."""
    return (
        _AS_GIVEN
        and (_MAX_ATTRIBUTES is None or count <= _MAX_ATTRIBUTES)
        and _PLAIN.issuperset(map(type, attributes.values()))
        and _KEYS.issuperset(map(type, attributes))
        and "" not in attributes
    )


def _sequences(attributes: Mapping[str, AnyValue]) -> dict[str, AnyValue] | None:
    """*attributes* with lists and tuples of plain values made tuples, as the SDK keeps
    them, or None when another kind of value is there (or a limit applies)."""
    if not (
        _AS_GIVEN and (_MAX_ATTRIBUTES is None or len(attributes) <= _MAX_ATTRIBUTES)
        and _KEYS.issuperset(map(type, attributes)) and "" not in attributes
    ):  # fmt: skip
        return None
    kept: dict[str, AnyValue] = {}
    for key, value in attributes.items():
        kind = type(value)
        if kind in _PLAIN or value is None:
            kept[key] = value
        elif (kind is list or kind is tuple) and _PLAIN.issuperset(map(type, value)):  # type: ignore[arg-type]
            kept[key] = tuple(value)  # type: ignore[arg-type]
        else:
            return None
    return kept


def _attributes(attributes: Attributes) -> dict[str, AnyValue]:
    """*attributes* as the SDK keeps them: plain values (and lists of them, as tuples)
    checked here, anything else (and more than the limit) through OpenTelemetry's
    ``BoundedAttributes``."""
    if not attributes:
        return {}
    if _plain(attributes, len(attributes)):
        return dict(attributes)
    kept = _sequences(attributes)
    if kept is not None:
        return kept
    bounded = BoundedAttributes(
        _MAX_ATTRIBUTES, attributes, immutable=False, max_value_len=_LIMITS.max_attribute_length
    )
    return dict(bounded)


class RecordedSpan(trace.Span):
    """A recorded span of ``span`` or ``child_span`` for a ``SpanRecorder``: an
    OpenTelemetry API ``Span`` that keeps what the SDK's span keeps (attributes cleaned the
    same way, within the same limits) and reads like its ``ReadableSpan`` once ended
    (``name``, ``kind``, ``context``, ``parent``, ``start_time``, ``end_time``,
    ``attributes``, ``events``, ``links``, ``status``), at a fraction of its cost."""

    kind: Final = SpanKind.INTERNAL

    def __init__(
        self, name: str, parent: SpanContext | None, attributes: Attributes,
        links: Sequence[SpanContext], sink: Callable[[RecordedSpan], None],
    ) -> None:  # fmt: skip
        self.name = name
        self.parent = parent
        if parent is None:
            trace_id, state = getrandbits(128) or 1, _NO_STATE
        else:
            trace_id, state = parent.trace_id, parent.trace_state
        self.context = SpanContext(
            trace_id, getrandbits(64) or 1, is_remote=False, trace_flags=_SAMPLED,
            trace_state=state,
        )  # fmt: skip
        self.attributes = _attributes(attributes)
        self.events: tuple[Event, ...] = ()
        self.links: tuple[Link, ...] = (
            tuple(Link(c) for c in links if c.is_valid)[: _LIMITS.max_links] if links else ()
        )
        self.status = _UNSET
        self.start_time = time_ns()
        self.end_time: int | None = None
        self._sink = sink

    def end(self, end_time: int | None = None) -> None:
        """End the span and hand it to its recorder (once; later calls do nothing)."""
        if self.end_time is not None:
            return
        self.end_time = time_ns() if end_time is None else end_time
        self._sink(self)

    def get_span_context(self) -> SpanContext:
        return self.context

    def set_attributes(self, attributes: Mapping[str, AnyValue]) -> None:
        if self.end_time is not None or not attributes:
            return
        kept = self.attributes
        if _plain(attributes, len(kept) + len(attributes)):
            kept.update(attributes)
        else:
            self.attributes = _attributes({**kept, **attributes})

    def set_attribute(self, key: str, value: AnyValue) -> None:
        self.set_attributes({key: value})

    def add_event(
        self, name: str, attributes: Attributes = None, timestamp: int | None = None
    ) -> None:
        if self.end_time is not None:
            return
        cleaned = BoundedAttributes(
            _LIMITS.max_event_attributes, attributes, immutable=True,
            max_value_len=_LIMITS.max_attribute_length,
        )  # fmt: skip
        event = Event(name, cleaned, time_ns() if timestamp is None else timestamp)
        self.events = (*self.events, event)[-(_LIMITS.max_events or 128) :]

    def add_link(self, context: SpanContext, attributes: Attributes = None) -> None:
        if self.end_time is not None:
            return
        if not context.is_valid and not attributes and not context.trace_state:
            return
        if len(self.links) < (_LIMITS.max_links or 128):
            self.links = (*self.links, Link(context, attributes))

    def update_name(self, name: str) -> None:
        if self.end_time is None:
            self.name = name

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """As the SDK's span: an OK status is final, UNSET is ignored."""
        if self.end_time is not None or self.status.status_code is StatusCode.OK:
            return
        if isinstance(status, Status):
            if status.status_code is not StatusCode.UNSET:
                self.status = status
        elif status is not StatusCode.UNSET:
            self.status = Status(status, description)

    def record_exception(
        self, exception: BaseException, attributes: Attributes = None,
        timestamp: int | None = None, escaped: bool = False,
    ) -> None:  # fmt: skip
        """An ``exception`` event with the attributes the SDK's span gives it."""
        kind = type(exception)
        module = kind.__module__
        described: dict[str, AnyValue] = {
            "exception.type": f"{module}.{kind.__qualname__}"
            if module and module != "builtins" else kind.__qualname__,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }  # fmt: skip
        if attributes:
            described.update(attributes)
        self.add_event("exception", described, timestamp)


_provider = TracerProvider(
    sampler=_WhereRecording(), resource=Resource.create({"service.name": TRACER_NAME})
)
_provider.add_span_processor(_Routing())

tracer: Tracer = _provider.get_tracer(TRACER_NAME)


@contextmanager
def recording(processor: SpanProcessor, *, record_text: bool = False) -> Iterator[None]:
    """Record the spans started in this context (and tasks spawned from it) into *processor*.

    Every span is recorded; which traces are kept is the processor's choice (the telemetry
    tables sample whole traces once they end, ``TailSampler``). The processor's ``on_end``
    is called on the thread that ends the span and must not block (buffer the span, work
    on it elsewhere: ``SpanBuffer``); its ``on_start`` is not called. Leaving the block
    stops recording new spans; spans already started still reach *processor* when they
    end. Nothing is flushed here. *record_text* lets instrumentation add prompt and answer
    text (``records_text``).
    """
    token = _current.set(_Recording(processor, record_text))
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
    child of the current span; so does a span started where no span is current.
    Cancellation (``trio.Cancelled``, alone or in groups) ends the span with
    ``kittiwake.outcome`` ``interrupted`` and its status unset; any other exception sets
    the error status with the exception's type and message. Both propagate.
    """
    return _SpanBlock(name, attributes, root, links)


class _SpanBlock:
    """The context manager ``span`` returns (a class: cheaper than a generator's)."""

    __slots__ = ("_name", "_attributes", "_root", "_links", "_token", "_mine", "_span")

    def __init__(
        self, name: str, attributes: Attributes, root: bool, links: Sequence[SpanContext]
    ) -> None:
        self._name = name
        self._attributes = attributes
        self._root = root
        self._links = links
        self._token: contextvars.Token[Context] | None = None
        self._mine: contextvars.Token[_Attached | None] | None = None
        self._span: trace.Span | None = None

    def __enter__(self) -> trace.Span:
        where = _current.get()
        if where is None:
            return trace.INVALID_SPAN
        context: SpanContext | None = None  # a new trace, unless the current one goes on
        if not self._root:
            parent, context, valid = _current_span()
            if context is None and valid:
                return parent  # a trace recorded elsewhere (or not at all): not ours
        current: trace.Span
        if where.sink is not None:
            current = RecordedSpan(self._name, context, self._attributes, self._links, where.sink)
        else:
            current = _sdk_span(self._name, self._attributes, self._root, self._links)
        self._span = current
        self._attach(current, current.get_span_context())
        return current

    def _attach(self, current: trace.Span, recorded: SpanContext | None) -> None:
        attached = trace.set_span_in_context(current)
        self._token = attach(attached)
        self._mine = _attached.set((attached, current, recorded))

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
            if self._mine is not None:
                _attached.reset(self._mine)
            detach(token)
        if current is not None:
            current.end()


def _current_span() -> tuple[trace.Span, SpanContext | None, bool]:
    """The current span, its context when it is valid and recorded, and whether it is
    valid: from what ``span`` attached while that is still current, else from the API."""
    mine = _attached.get()
    if mine is not None and get_current() is mine[0]:
        return mine[1], mine[2], True
    current = trace.get_current_span()
    context = current.get_span_context()
    if not context.is_valid:
        return current, None, False
    return current, context if context.trace_flags.sampled else None, True


def _sdk_span(
    name: str, attributes: Attributes, root: bool, links: Sequence[SpanContext]
) -> trace.Span:
    """A recorded span of the SDK's (the processor takes only those)."""
    chosen = _chosen.set(True)  # the sampler records it without deciding again
    try:
        return tracer.start_span(
            name, context=_ROOT if root else None, attributes=attributes,
            links=[Link(c) for c in links if c.is_valid] if links else None,
        )  # fmt: skip
    finally:
        _chosen.reset(chosen)


def child_span(name: str, attributes: Attributes = None) -> trace.Span | None:
    """A span started now as a child of the current span, not made current; None unless
    the current span is recorded here. The caller ends it (from any thread)."""
    where = _current.get()
    if where is None:
        return None
    context = _current_span()[1]
    if context is None:
        return None
    if where.sink is not None:
        return RecordedSpan(name, context, attributes, (), where.sink)
    return _sdk_span(name, attributes, False, ())


def current_span_context() -> SpanContext | None:
    """The current span's context when spans are recorded here and the current span is
    recorded (its trace sampled), else None."""
    if _current.get() is None:
        return None
    return _current_span()[1]


def _cancelled(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_cancelled(inner) for inner in exc.exceptions)
    return isinstance(exc, trio.Cancelled)


def active_processor() -> SpanProcessor | None:
    """The processor spans started here would reach, or None when nothing is recorded."""
    where = _current.get()
    return None if where is None else where.processor
