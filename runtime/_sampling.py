"""Finished spans off the hot path: a bounded buffer, and tail sampling by whole traces.

A span processor that records every trace (``recording``) puts each finished span in a
:class:`SpanBuffer`: on the thread that ends the span that is one lock and one append (or,
when ``bound`` spans already wait, a count of the dropped span). A thread of its own takes
the buffer in batches and hands the spans to a :class:`TailSampler`, which keeps or drops
each trace once its root span has ended, seeing the whole trace:

- a trace with a span whose status is an error is kept;
- a trace whose root took longer than the running p95 of the roots of the same name (the
  last ``window`` of them, once ``warmup`` were seen) is kept: a slow turn (``drain``) or
  request;
- any other trace is kept for the share ``sample`` of trace ids (by the id's low 64 bits,
  as OpenTelemetry's ``TraceIdRatioBased`` draws), dropped otherwise.

Spans of a trace whose root has not ended wait (at most ``pending_max`` of them; past that
the oldest trace is decided without its root, on its errors and its id). A span that ends
after its trace was decided follows that decision (the last ``decided_max`` are kept).
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Final, Generic, Protocol, TypeVar

from opentelemetry.trace import SpanContext, Status, StatusCode

__all__ = ["SamplingCounts", "SpanBuffer", "TailSampler"]

T = TypeVar("T")
_LOW_64: Final = (1 << 64) - 1
DEFAULT_WINDOW: Final = 1000
DEFAULT_WARMUP: Final = 20
DEFAULT_PENDING_MAX: Final = 16_384
DEFAULT_DECIDED_MAX: Final = 16_384
DEFAULT_NAMES_MAX: Final = 256


class SpanBuffer(Generic[T]):
    """Finished spans waiting to be taken, at most *bound* of them; safe from any thread.

    ``append`` is what a span costs the thread that ends it: one uncontended lock and a
    deque append. When *bound* spans already wait the span is dropped and counted in
    ``dropped`` (nothing blocks, nothing older is evicted).
    """

    def __init__(self, bound: int) -> None:
        if bound < 1:
            raise ValueError(f"a span buffer holds at least one span, not {bound}")
        self.bound = bound
        self.dropped = 0
        self._items: deque[T] = deque()
        self._lock = threading.Lock()

    def append(self, item: T) -> int:
        """Queue *item*; the number now waiting, or 0 when it was dropped (full)."""
        with self._lock:
            items = self._items
            if len(items) >= self.bound:
                self.dropped += 1
                return 0
            items.append(item)
            return len(items)

    def take(self) -> deque[T]:
        """Everything waiting, oldest first; the buffer is empty after."""
        with self._lock:
            items, self._items = self._items, deque()
        return items

    def __len__(self) -> int:
        return len(self._items)


class _Finished(Protocol):
    """What the sampler reads of a finished span (an SDK ``ReadableSpan`` or a
    ``RecordedSpan``)."""

    @property
    def name(self) -> str: ...
    @property
    def context(self) -> SpanContext | None: ...
    @property
    def parent(self) -> SpanContext | None: ...
    @property
    def start_time(self) -> int | None: ...
    @property
    def end_time(self) -> int | None: ...
    @property
    def status(self) -> Status: ...


S = TypeVar("S", bound=_Finished)


class SamplingCounts:
    """What a :class:`TailSampler` decided so far (traces, except ``spans_dropped``)."""

    __slots__ = ("errors", "slow", "sampled", "dropped", "spans_dropped", "evicted")

    def __init__(self) -> None:
        self.errors = 0
        """Traces kept for a span in error."""
        self.slow = 0
        """Traces kept because their root took longer than the running p95."""
        self.sampled = 0
        """Traces kept by the draw."""
        self.dropped = 0
        """Traces not kept."""
        self.spans_dropped = 0
        """Spans of the traces not kept."""
        self.evicted = 0
        """Traces decided before their root ended (``pending_max`` reached)."""

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class _Durations:
    """The last *window* durations of one root name, kept sorted for the p95."""

    __slots__ = ("order", "sorted")

    def __init__(self) -> None:
        self.order: deque[int] = deque()
        self.sorted: list[int] = []

    def p95(self, warmup: int) -> int | None:
        if len(self.sorted) < warmup:
            return None
        return self.sorted[int(0.95 * (len(self.sorted) - 1))]

    def add(self, duration: int, window: int) -> None:
        if len(self.order) >= window:
            old = self.order.popleft()
            del self.sorted[bisect.bisect_left(self.sorted, old)]
        self.order.append(duration)
        bisect.insort(self.sorted, duration)


class TailSampler(Generic[S]):
    """Keeps or drops whole traces once their root has ended; see the module docstring.

    Not thread-safe: one thread (the writer's) calls :meth:`offer` and :meth:`flush`.

    Args:
        sample: the share of traces kept that neither failed nor were slow (0 to 1).
        window: root durations per name the running p95 is taken over.
        warmup: roots of a name seen before any of that name counts as slow.
        pending_max: spans held for traces whose root has not ended.
        decided_max: decisions remembered for spans that end after their trace's.
        names_max: root names with a running p95 (later names are only drawn).
    """

    def __init__(
        self, sample: float, *, window: int = DEFAULT_WINDOW, warmup: int = DEFAULT_WARMUP,
        pending_max: int = DEFAULT_PENDING_MAX, decided_max: int = DEFAULT_DECIDED_MAX,
        names_max: int = DEFAULT_NAMES_MAX,
    ) -> None:  # fmt: skip
        if not 0.0 <= sample <= 1.0:
            raise ValueError(f"sample must be between 0 and 1, got {sample}")
        self.sample = sample
        self._bound = int(sample * (1 << 64))
        self._window = window
        self._warmup = warmup
        self._pending_max = pending_max
        self._decided_max = decided_max
        self._names_max = names_max
        self._pending: OrderedDict[int, list[S]] = OrderedDict()
        self._pending_spans = 0
        self._decided: OrderedDict[int, bool] = OrderedDict()
        self._durations: dict[str, _Durations] = {}
        self.counts = SamplingCounts()

    @property
    def pending(self) -> int:
        """Spans waiting for their trace's root to end."""
        return self._pending_spans

    def p95s(self) -> dict[str, int]:
        """The running p95 of each root name's durations (ns), once ``warmup`` were seen."""
        out: dict[str, int] = {}
        for name, durations in self._durations.items():
            p95 = durations.p95(self._warmup)
            if p95 is not None:
                out[name] = p95
        return out

    def offer(self, spans: Iterable[S]) -> list[S]:
        """Take finished *spans* (in the order they ended); return those of the traces
        kept now, a trace's spans together."""
        kept: list[S] = []
        for span in spans:
            context = span.context
            if context is None:  # pragma: no cover - a finished span always has one
                continue
            trace_id = context.trace_id
            decided = self._decided.get(trace_id)
            if decided is not None:
                if decided:
                    kept.append(span)
                else:
                    self.counts.spans_dropped += 1
                continue
            parent = span.parent
            if parent is None or parent.is_remote:
                group = self._pending.pop(trace_id, None) or []
                self._pending_spans -= len(group)
                group.append(span)
                self._decide(trace_id, group, span, kept)
            else:
                self._pending.setdefault(trace_id, []).append(span)
                self._pending_spans += 1
        while self._pending_spans > self._pending_max:
            self._evict(kept)
        return kept

    def flush(self) -> list[S]:
        """Decide every trace still waiting for its root (on its errors and its id);
        return the spans kept. For shutting down."""
        kept: list[S] = []
        while self._pending:
            self._evict(kept)
        return kept

    def _evict(self, kept: list[S]) -> None:
        trace_id, group = self._pending.popitem(last=False)
        self._pending_spans -= len(group)
        self.counts.evicted += 1
        self._decide(trace_id, group, None, kept)

    def _decide(self, trace_id: int, group: list[S], root: S | None, kept: list[S]) -> None:
        counts = self.counts
        slow = False
        if root is not None and root.end_time is not None and root.start_time is not None:
            slow = self._slow(root.name, root.end_time - root.start_time)
        if any(s.status.status_code is StatusCode.ERROR for s in group):
            counts.errors += 1
            keep = True
        elif slow:
            counts.slow += 1
            keep = True
        elif (trace_id & _LOW_64) < self._bound:
            counts.sampled += 1
            keep = True
        else:
            counts.dropped += 1
            counts.spans_dropped += len(group)
            keep = False
        if keep:
            kept.extend(group)
        decided = self._decided
        decided[trace_id] = keep
        if len(decided) > self._decided_max:
            decided.popitem(last=False)

    def _slow(self, name: str, duration: int) -> bool:
        """Whether *duration* is over the running p95 of *name*'s roots; then counts it."""
        durations = self._durations.get(name)
        if durations is None:
            if len(self._durations) >= self._names_max:
                return False
            durations = self._durations[name] = _Durations()
        p95 = durations.p95(self._warmup)
        durations.add(duration, self._window)
        return p95 is not None and duration > p95
