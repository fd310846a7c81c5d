"""Kittiwake's tracer: OpenTelemetry spans, recorded only where a runtime asks for them.

A span is recorded only when it starts inside ``recording(processor)``: the processor (any
SDK ``SpanProcessor``) is held in a context variable, so trio tasks spawned inside inherit
it and two runtimes in one process keep their spans apart. Outside it ``span`` yields the
invalid span and nothing of OpenTelemetry's SDK is needed: this module uses its API only,
and the recording side (the SDK's provider, ``tracer``, ``SpanRecorder``, ``RecordedSpan``:
``runtime._recorded``) loads with the first ``recording``, so a process with telemetry off
never imports the SDK.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Final

import trio
from opentelemetry import trace
from opentelemetry.context import Context, attach, detach, get_current
from opentelemetry.trace import SpanContext, Status, StatusCode
from opentelemetry.util.types import Attributes

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

    from runtime._recorded import RecordedSpan, SpanRecorder

TRACER_NAME: Final = "kittiwake"
_ROOT: Final = Context()
"""The empty context: a span started in it begins a new trace."""


class _Recording:
    """Where this context's spans go: the processor, and text or not; and how its spans are
    made (``runtime._recorded``, imported by the first one: a processor is an SDK object,
    so the SDK is loaded already)."""

    __slots__ = ("processor", "record_text", "sink", "recorded", "sdk_span")

    def __init__(self, processor: SpanProcessor, record_text: bool) -> None:
        recorder, self.recorded, self.sdk_span = _SDK_SIDE or _sdk_side()
        self.processor = processor
        self.record_text = record_text
        self.sink: Callable[[RecordedSpan], None] | None = (
            processor.record if isinstance(processor, recorder) else None
        )
        """Where ``span`` hands its recorded spans without the SDK's span objects."""


_SdkSide = tuple["type[SpanRecorder]", "type[RecordedSpan]", "Callable[..., trace.Span]"]
_SDK_SIDE: _SdkSide | None = None
"""``runtime._recorded``'s names once the first ``recording`` imported it."""


def _sdk_side() -> _SdkSide:
    global _SDK_SIDE
    from runtime._recorded import RecordedSpan, SpanRecorder, sdk_span

    _SDK_SIDE = (SpanRecorder, RecordedSpan, sdk_span)
    return _SDK_SIDE


_current: contextvars.ContextVar[_Recording | None] = contextvars.ContextVar(
    "kittiwake_recording", default=None
)
_chosen: contextvars.ContextVar[bool] = contextvars.ContextVar("kittiwake_chosen", default=False)
"""Set while ``span(root=True)`` starts a trace it chose to record."""
_Attached = tuple[Context, trace.Span, SpanContext | None]
_attached: contextvars.ContextVar[_Attached | None] = contextvars.ContextVar(
    "kittiwake_attached", default=None
)
"""The context ``span`` attached last here, with its span (valid) and that span's context
when it is recorded: while that context is still OpenTelemetry's current one, its span is
the current span, known without the API's lookup."""


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
            current = where.recorded(self._name, context, self._attributes, self._links, where.sink)
        else:
            current = where.sdk_span(self._name, self._attributes, self._root, self._links)
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
        return where.recorded(name, context, attributes, (), where.sink)
    return where.sdk_span(name, attributes, False, ())


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
