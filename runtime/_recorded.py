"""The recording side of Kittiwake's tracer: OpenTelemetry's SDK, loaded with the first
``recording`` (a runtime with telemetry on) or the first use of ``tracer``, ``SpanRecorder``
or ``RecordedSpan`` (``runtime.telemetry`` names them on first use, PEP 562).

``tracer`` is an OpenTelemetry API ``Tracer`` of Kittiwake's own SDK ``TracerProvider``
(the process-global provider stays the embedding program's); its sampler records a span
only where ``recording`` set a processor (``runtime._telemetry``).
"""

from __future__ import annotations

import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from random import getrandbits
from time import time_ns
from typing import Final

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
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

from runtime._telemetry import _ROOT, TRACER_NAME, _chosen, _current

__all__ = ["RecordedSpan", "SpanRecorder", "sdk_span", "tracer"]

_DROP: Final = SamplingResult(Decision.DROP)


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


def sdk_span(
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
