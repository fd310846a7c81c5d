"""System Context Registry: Location-scoped, stable-keyed producers of Context Sources."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Final, TypeAlias, final

import msgspec
import trio

from runtime.context._errors import DuplicateContextKeyError
from runtime.context._system import SystemContext, validate_context_key

__all__ = [
    "ContributionHandle",
    "Produced",
    "Producer",
    "RegistryStatistics",
    "SystemContextRegistry",
]

Produced: TypeAlias = SystemContext | Sequence[SystemContext]
Producer: TypeAlias = Produced | Callable[[], Awaitable[Produced]]


class RegistryStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """A point-in-time view of a :class:`SystemContextRegistry`."""

    contributions: int
    loads: int


@final
class ContributionHandle:
    """One live contribution; closing it removes its sources from later loads."""

    __slots__ = ("_registry", "key")

    def __init__(self, registry: SystemContextRegistry, key: str) -> None:
        self.key: Final = key
        self._registry: SystemContextRegistry | None = registry

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._registry is None

    def close(self) -> None:
        """Withdraw the contribution; idempotent, never blocks.

        A load already in progress still uses the producer; the sources disappear
        from the next load, i.e. at the next Safe Provider-Turn Boundary.
        """
        registry, self._registry = self._registry, None
        if registry is not None:
            registry._withdraw(self.key, self)

    def __enter__(self) -> ContributionHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@final
class SystemContextRegistry:
    """Ordered, scoped producers that together make the current System Context.

    Producers are evaluated concurrently and their sources combined in
    contribution-key order, so the result never depends on completion order.
    """

    __slots__ = ("_contributions", "_loads")

    def __init__(self) -> None:
        self._contributions: dict[str, tuple[ContributionHandle, Producer]] = {}
        self._loads = 0

    def contribute(self, key: str, producer: Producer) -> ContributionHandle:
        """Register ``producer`` under the stable contribution ``key``; never blocks.

        Args:
          key: stable namespaced contribution key, e.g. ``core/builtins``.
          producer: a System Context (or a sequence of them), or an async callable
            returning one; it is evaluated at every :meth:`load`.

        Raises:
          InvalidContextKeyError: ``key`` is not a stable namespaced key.
          DuplicateContextKeyError: a live contribution already uses ``key``.
        """
        validate_context_key(key)
        if key in self._contributions:
            raise DuplicateContextKeyError(f"contribution {key!r} is already registered")
        handle = ContributionHandle(self, key)
        self._contributions[key] = (handle, producer)
        return handle

    @property
    def keys(self) -> list[str]:
        """Live contribution keys in load order."""
        return sorted(self._contributions)

    def statistics(self) -> RegistryStatistics:
        """Counts of live contributions and completed loads."""
        return RegistryStatistics(contributions=len(self._contributions), loads=self._loads)

    async def load(self) -> SystemContext:
        """Evaluate every producer concurrently and combine in contribution-key order.

        A cancellation point; it yields to the scheduler only when a producer does.
        Cancellation propagates once every producer has been cancelled. A producer
        that raises is a defect; its error propagates inside an ``ExceptionGroup``.

        Raises:
          DuplicateContextKeyError: two contributions produced the same source key.
        """
        producers = [self._contributions[key][1] for key in self.keys]
        results: list[Produced] = []
        pending: list[tuple[int, Callable[[], Awaitable[Produced]]]] = []
        for index, producer in enumerate(producers):
            if callable(producer):
                pending.append((index, producer))
            results.append(SystemContext.EMPTY if callable(producer) else producer)
        if len(pending) == 1:
            index, producer = pending[0]
            results[index] = await producer()
        elif not pending:
            await trio.lowlevel.checkpoint_if_cancelled()
        else:

            async def produce(index: int, producer: Callable[[], Awaitable[Produced]]) -> None:
                results[index] = await producer()

            async with trio.open_nursery() as nursery:
                for index, producer in pending:
                    nursery.start_soon(produce, index, producer)
        self._loads += 1
        return SystemContext.combine(*(_as_context(result) for result in results))

    def _withdraw(self, key: str, handle: ContributionHandle) -> None:
        current = self._contributions.get(key)
        if current is not None and current[0] is handle:
            del self._contributions[key]


def _as_context(produced: Produced) -> SystemContext:
    if isinstance(produced, SystemContext):
        return produced
    return SystemContext.combine(*produced)
