"""System Context: Context Sources, their composition, and epoch decisions.

Loading is async and concurrent (:meth:`SystemContext.observe`); every decision
(:meth:`ObservedContext.initialize`, :meth:`ObservedContext.reconcile`,
:meth:`ObservedContext.replace`) is pure and works on already-loaded values.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Final, Generic, TypeAlias, TypeVar, final

import msgspec
import trio

from runtime.context._errors import (
    DuplicateContextKeyError,
    EmptyBaselineError,
    EmptyRenderingError,
    InvalidContextKeyError,
)
from runtime.context._snapshot import Snapshot, SnapshotEntry

__all__ = [
    "CONTEXT_KEY_PATTERN",
    "ContextSource",
    "InitializationBlocked",
    "InitializationOutcome",
    "Initialized",
    "ObservedContext",
    "ReconcileOutcome",
    "ReplaceOutcome",
    "ReplacementBlocked",
    "ReplacementReady",
    "SystemContext",
    "UNAVAILABLE",
    "Unavailable",
    "Unchanged",
    "Updated",
    "validate_context_key",
]

T = TypeVar("T")

CONTEXT_KEY_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._/-]*$")
_SEPARATOR: Final = "\n\n"


@final
class Unavailable:
    """Type of :data:`UNAVAILABLE`: a temporary inability to observe a value."""

    __slots__ = ()
    _instance: Unavailable | None = None

    def __new__(cls) -> Unavailable:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNAVAILABLE"

    def __reduce__(self) -> str:
        return "UNAVAILABLE"


UNAVAILABLE: Final = Unavailable()
"""Unavailable Context: keep the previously admitted value and emit nothing."""


def validate_context_key(key: str) -> str:
    """Return ``key`` if it is a stable namespaced key (``ns/name``).

    Raises:
      InvalidContextKeyError: ``key`` does not match :data:`CONTEXT_KEY_PATTERN`.
    """
    if not isinstance(key, str) or CONTEXT_KEY_PATTERN.fullmatch(key) is None:
        raise InvalidContextKeyError(
            f"context key {key!r} must match {CONTEXT_KEY_PATTERN.pattern}"
        )
    return key


@final
class ContextSource(Generic[T]):
    """One typed Context Source. Build it with :meth:`SystemContext.make`."""

    __slots__ = ("_baseline", "_decoder", "_removal", "_update", "key", "loader", "type", "value")

    def __init__(
        self,
        key: str,
        type: type[T],
        loader: Callable[[], Awaitable[T | Unavailable]] | None,
        baseline: Callable[[T], str],
        update: Callable[[T], str],
        removal: Callable[[T], str] | None,
    ) -> None:
        self.key: Final = key
        self.type: Final = type
        self.loader: Final = loader
        self.value: T | Unavailable = UNAVAILABLE
        self._baseline = baseline
        self._update = update
        self._removal = removal
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(type)

    def __repr__(self) -> str:
        return f"ContextSource({self.key!r})"

    async def load(self) -> T | Unavailable:
        """Run the loader once (or return the already-loaded value).

        Loaders are infallible, so their errors propagate.
        """
        if self.loader is None:
            await trio.lowlevel.checkpoint()
            return self.value
        return await self.loader()

    def decodes(self, raw: msgspec.Raw) -> bool:
        """Whether ``raw`` JSON still decodes as this source's value type."""
        try:
            self._decoder.decode(raw)
        except msgspec.DecodeError:
            return False
        return True

    def entry(self, value: T, encoded: msgspec.Raw) -> SnapshotEntry:
        """The snapshot entry admitting ``value`` whose codec JSON is ``encoded``."""
        removed = None if self._removal is None else self._render(self._removal, value)
        return SnapshotEntry(value=encoded, removed=removed)

    def render_baseline(self, value: T) -> str:
        """Baseline rendering of ``value``."""
        return self._render(self._baseline, value)

    def render_update(self, value: T) -> str:
        """Update rendering of ``value``: its newly effective state."""
        return self._render(self._update, value)

    def _render(self, renderer: Callable[[T], str], value: T) -> str:
        text = renderer(value)
        if not text:
            raise EmptyRenderingError(f"context source {self.key!r} rendered empty text")
        return text


_AnySource: TypeAlias = ContextSource[Any]
_encode: Final = msgspec.json.Encoder(order="sorted").encode


@final
class SystemContext:
    """An opaque, ordered composition of Context Sources with unique keys."""

    __slots__ = ("_sources",)

    EMPTY: SystemContext

    def __init__(self, sources: tuple[_AnySource, ...] = ()) -> None:
        seen: set[str] = set()
        for source in sources:
            if source.key in seen:
                raise DuplicateContextKeyError(f"duplicate context key {source.key!r}")
            seen.add(source.key)
        self._sources = sources

    def __repr__(self) -> str:
        return f"SystemContext({list(self.keys)!r})"

    @property
    def keys(self) -> tuple[str, ...]:
        """Context Source keys in composition order."""
        return tuple(source.key for source in self._sources)

    @property
    def sources(self) -> tuple[_AnySource, ...]:
        """Context Sources in composition order."""
        return self._sources

    @staticmethod
    def make(
        key: str,
        type: type[T],
        loader: Callable[[], Awaitable[T | Unavailable]],
        baseline: Callable[[T], str],
        update: Callable[[T], str],
        removal: Callable[[T], str] | None = None,
    ) -> SystemContext:
        """Make a one-source System Context.

        Args:
          key: stable namespaced key, e.g. ``core/date``.
          type: msgspec-compatible value type; its JSON encoding is compared and stored.
          loader: infallible async loader returning a value or :data:`UNAVAILABLE`.
          baseline: pure renderer for the Baseline System Context (or a first admission).
          update: pure renderer for the newly effective value after a change.
          removal: pure renderer of the message admitted when the source disappears;
            sources without one disappear silently.

        Raises:
          InvalidContextKeyError: ``key`` is not a stable namespaced key.
        """
        source = ContextSource(validate_context_key(key), type, loader, baseline, update, removal)
        return SystemContext((source,))

    @staticmethod
    def loaded(
        key: str,
        type: type[T],
        value: T | Unavailable,
        baseline: Callable[[T], str],
        update: Callable[[T], str],
        removal: Callable[[T], str] | None = None,
    ) -> SystemContext:
        """Make a one-source System Context whose value is already loaded.

        For producers that observe their value themselves (e.g. a registry producer
        that discovers files); observing it costs nothing. Arguments and errors are
        those of :meth:`make`, with ``value`` in place of the loader.
        """
        source = ContextSource(validate_context_key(key), type, None, baseline, update, removal)
        source.value = value
        return SystemContext((source,))

    @staticmethod
    def combine(*contexts: SystemContext) -> SystemContext:
        """Concatenate ``contexts`` in caller order.

        Raises:
          DuplicateContextKeyError: two sources share a key.
        """
        return SystemContext(tuple(s for context in contexts for s in context._sources))

    @staticmethod
    def of_values(*values: tuple[SystemContext, Any]) -> ObservedContext:
        """Observed context from ``(one-source context, value)`` pairs; for pure callers."""
        context = SystemContext.combine(*(context for context, _ in values))
        return ObservedContext(context._sources, tuple(value for _, value in values))

    async def observe(self) -> ObservedContext:
        """Run every loader once, concurrently, and keep the values in source order.

        Already-loaded sources are read directly; a single loader is awaited without
        a nursery. A cancellation point; it yields to the scheduler only when a loader
        does. Cancellation propagates once every loader has been cancelled. A loader
        that raises is a defect: its error propagates (inside an ``ExceptionGroup``
        when several loaders run).
        """
        values: list[Any] = [source.value for source in self._sources]
        pending = [(i, s.loader) for i, s in enumerate(self._sources) if s.loader is not None]
        if len(pending) == 1:
            index, loader = pending[0]
            values[index] = await loader()
        elif not pending:
            await trio.lowlevel.checkpoint_if_cancelled()
        else:

            async def load(index: int, loader: Callable[[], Awaitable[Any]]) -> None:
                values[index] = await loader()

            async with trio.open_nursery() as nursery:
                for index, loader in pending:
                    nursery.start_soon(load, index, loader)
        return ObservedContext(self._sources, tuple(values))

    async def initialize(self) -> InitializationOutcome:
        """Observe once and render a fresh Baseline System Context with its snapshot.

        Cancellation and loader errors propagate as in :meth:`observe`.

        Raises:
          EmptyBaselineError: no source rendered anything.
        """
        return (await self.observe()).initialize()

    async def reconcile(self, snapshot: Snapshot) -> ReconcileOutcome:
        """Observe once and compare with ``snapshot``; see :meth:`ObservedContext.reconcile`."""
        return (await self.observe()).reconcile(snapshot)

    async def replace(self, snapshot: Snapshot) -> ReplaceOutcome:
        """Observe once and render a fresh generation; see :meth:`ObservedContext.replace`."""
        return (await self.observe()).replace(snapshot)


SystemContext.EMPTY = SystemContext()


class Initialized(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="initialized"):
    """A complete Baseline System Context and the snapshot that admits it."""

    baseline: str
    snapshot: Snapshot


class InitializationBlocked(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="initialization-blocked"
):
    """Initial context is unavailable; ``keys`` lists the unavailable sources."""

    keys: list[str]


class Unchanged(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="unchanged"):
    """Nothing to admit; keep the stored snapshot."""


class Updated(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="updated"):
    """One Mid-Conversation System Message ``text``; admit it together with ``snapshot``.

    ``keys`` lists the changed, added or removed source keys in rendering order.
    """

    text: str
    snapshot: Snapshot
    keys: list[str]


class ReplacementReady(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="replacement-ready"
):
    """A fresh Baseline System Context that starts a new Context Epoch."""

    baseline: str
    snapshot: Snapshot


class ReplacementBlocked(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="replacement-blocked"
):
    """A fresh baseline is needed but previously admitted ``keys`` are unavailable."""

    keys: list[str]


InitializationOutcome: TypeAlias = Initialized | InitializationBlocked
ReconcileOutcome: TypeAlias = Unchanged | Updated | ReplacementReady | ReplacementBlocked
ReplaceOutcome: TypeAlias = ReplacementReady | ReplacementBlocked


@final
class ObservedContext:
    """Loaded values of a System Context, in source order. Every method is pure."""

    __slots__ = ("_sources", "_values")

    def __init__(self, sources: tuple[_AnySource, ...], values: tuple[Any, ...]) -> None:
        self._sources = sources
        self._values = values

    def same_as(self, other: ObservedContext) -> bool:
        """Whether *other* holds the very same source and value objects, in order.

        Loaded values are never changed in place, so every method then answers for
        *other* as it answers for this one: a caller may reuse an answer.
        """
        if len(self._sources) != len(other._sources):
            return False
        return all(a is b for a, b in zip(self._sources, other._sources, strict=True)) and all(
            a is b for a, b in zip(self._values, other._values, strict=True)
        )

    @property
    def unavailable(self) -> list[str]:
        """Keys whose observation was :data:`UNAVAILABLE`, in source order."""
        return [s.key for s, v in zip(self._sources, self._values, strict=True) if v is UNAVAILABLE]

    def initialize(self) -> InitializationOutcome:
        """Render a complete baseline, or block if any source is unavailable.

        Raises:
          EmptyBaselineError: the context has no sources.
        """
        unavailable = self.unavailable
        if unavailable:
            return InitializationBlocked(keys=unavailable)
        baseline, snapshot = self._fresh()
        return Initialized(baseline=baseline, snapshot=snapshot)

    def replace(self, snapshot: Snapshot) -> ReplaceOutcome:
        """Render a fresh generation after compaction or another baseline-replacing transition.

        Blocked while a source admitted in ``snapshot`` is unavailable; an unavailable
        source that was never admitted is omitted until first successfully loaded.

        Raises:
          EmptyBaselineError: no source rendered anything.
        """
        blocked = [key for key in self.unavailable if key in snapshot]
        if blocked:
            return ReplacementBlocked(keys=blocked)
        baseline, fresh = self._fresh()
        return ReplacementReady(baseline=baseline, snapshot=fresh)

    def reconcile(self, snapshot: Snapshot) -> ReconcileOutcome:
        """Compare loaded values with ``snapshot`` and return exactly one next action.

        A changed source renders its update, a source absent from ``snapshot`` renders
        its baseline once, a removable source no longer composed renders its stored
        removal message (in key order, after the changes). Everything joins into one
        text. An unavailable source keeps its admitted value and renders nothing. A
        stored value its source can no longer decode requires a replacement.

        Raises:
          EmptyBaselineError: a replacement was required but nothing rendered.
        """
        entries = dict(snapshot)
        parts: list[str] = []
        keys: list[str] = []
        for source, value in zip(self._sources, self._values, strict=True):
            if value is UNAVAILABLE:
                continue
            encoded = msgspec.Raw(_encode(value))
            entry = entries.get(source.key)
            if entry is None:
                parts.append(source.render_baseline(value))
            elif entry.value == encoded:
                continue
            elif not source.decodes(entry.value):
                return self.replace(snapshot)
            else:
                parts.append(source.render_update(value))
            keys.append(source.key)
            entries[source.key] = source.entry(value, encoded)
        self._remove_departed(entries, parts, keys)
        if not parts:
            return Unchanged()
        return Updated(text=_SEPARATOR.join(parts), snapshot=Snapshot(entries), keys=keys)

    def _remove_departed(
        self, entries: dict[str, SnapshotEntry], parts: list[str], keys: list[str]
    ) -> None:
        present = {source.key for source in self._sources}
        for key in sorted(entries.keys() - present):
            removed = entries[key].removed
            if removed is not None:
                parts.append(removed)
                keys.append(key)
                del entries[key]

    def _fresh(self) -> tuple[str, Snapshot]:
        parts: list[str] = []
        entries: dict[str, SnapshotEntry] = {}
        for source, value in zip(self._sources, self._values, strict=True):
            if value is UNAVAILABLE:
                continue
            parts.append(source.render_baseline(value))
            entries[source.key] = source.entry(value, msgspec.Raw(_encode(value)))
        if not parts:
            raise EmptyBaselineError("the Baseline System Context would be empty")
        return _SEPARATOR.join(parts), Snapshot(entries)
