"""The event hub: committed durable events and live-only deltas, fanned out to subscribers.

Notifications are advisory. A subscriber's buffer is bounded; when it overflows
the subscriber is told once (``OVERFLOWED``) and re-reads durable events from the
store, which holds every one of them. Deltas lost to an overflow are gone, as
live-only deltas may be.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal

import msgspec
import trio

from runtime import LiveDelta
from storage import StoredEvent

__all__ = ["OVERFLOWED", "EventHub", "HubItem", "Notice", "Subscription"]

OVERFLOWED: Final = "overflowed"


class Notice(msgspec.Struct, frozen=True, kw_only=True):
    """A Location's live notice for every-session subscribers, in OpenCode's bus shape
    (``mcp.tools.changed`` ``{server}``); never stored, not a session's."""

    type: str
    properties: dict[str, Any]
    directory: str


HubItem = StoredEvent | LiveDelta | Notice | Literal["overflowed"]
DEFAULT_SUBSCRIBER_BUFFER: Final = 1024
_log = logging.getLogger("kittiwake.hub")


class Subscription:
    """One subscriber's bounded buffer; close it (or use ``with``) when done."""

    def __init__(self, hub: EventHub, session_id: str | None, max_buffer: int) -> None:
        self.session_id = session_id
        self._hub = hub
        self._send, self._receive = trio.open_memory_channel[HubItem](math.inf)
        self._max_buffer = max_buffer
        self._overflowed = False

    def offer(self, item: HubItem) -> None:
        """Queue *item* without blocking; past the bound, mark the subscriber overflowed."""
        if self._overflowed:
            return
        if self._send.statistics().current_buffer_used >= self._max_buffer:
            self._overflowed = True
            self._send.send_nowait(OVERFLOWED)
            return
        self._send.send_nowait(item)

    async def receive(self) -> HubItem:
        """Wait for the next item; after ``OVERFLOWED`` the buffer starts afresh."""
        item = await self._receive.receive()
        if item == OVERFLOWED:
            self._overflowed = False
        return item

    def receive_nowait(self) -> HubItem:
        item = self._receive.receive_nowait()
        if item == OVERFLOWED:
            self._overflowed = False
        return item

    def close(self) -> None:
        self._hub._remove(self)
        self._send.close()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventHub:
    """Fan-out of committed events and deltas by session (or to every session)."""

    def __init__(self) -> None:
        self._by_session: dict[str | None, set[Subscription]] = {}
        self._observers: list[Callable[[StoredEvent | LiveDelta], None]] = []
        self.published = 0

    def add_observer(self, observe: Callable[[StoredEvent | LiveDelta], None]) -> None:
        """Call *observe* with every item, synchronously, before any subscriber is offered
        it (a projection every subscriber then reads is never behind them). It must not
        block; an exception it raises is logged and the item is still offered."""
        self._observers.append(observe)

    def remove_observer(self, observe: Callable[[StoredEvent | LiveDelta], None]) -> None:
        """Stop calling *observe* (no-op when it is not added)."""
        if observe in self._observers:
            self._observers.remove(observe)

    def subscribe(
        self, session_id: str | None, *, max_buffer: int = DEFAULT_SUBSCRIBER_BUFFER
    ) -> Subscription:
        """Subscribe to one session (or, with ``None``, to all); never blocks."""
        subscription = Subscription(self, session_id, max_buffer)
        self._by_session.setdefault(session_id, set()).add(subscription)
        return subscription

    def publish(self, events: Iterable[StoredEvent]) -> None:
        """Offer committed events to their session's subscribers and to global ones."""
        for event in events:
            self.published += 1
            self._offer(event.aggregate_id, event)

    def publish_delta(self, delta: LiveDelta) -> None:
        """Offer a live-only delta; it is never stored."""
        self._offer(delta.session_id, delta)

    def publish_notice(self, notice: Notice) -> None:
        """Offer a Location's *notice* to the subscribers of every session (not to
        observers, nor to one session's subscribers)."""
        for sub in self._by_session.get(None, ()):
            sub.offer(notice)

    def follows(self, session_id: str) -> bool:
        """Whether anyone here subscribes to *session_id*'s events (or to every session's)."""
        return bool(self._by_session.get(session_id) or self._by_session.get(None))

    def subscriber_count(self) -> int:
        return sum(len(subs) for subs in self._by_session.values())

    def _offer(self, session_id: str, item: StoredEvent | LiveDelta) -> None:
        for observe in self._observers:
            try:
                observe(item)
            except Exception:  # noqa: BLE001 - an observer's fault never stops the fan-out
                _log.exception("hub observer failed", extra={"session": session_id})
        for sub in self._by_session.get(session_id, ()):
            sub.offer(item)
        for sub in self._by_session.get(None, ()):
            sub.offer(item)

    def _remove(self, subscription: Subscription) -> None:
        subs = self._by_session.get(subscription.session_id)
        if subs is not None:
            subs.discard(subscription)
            if not subs:
                del self._by_session[subscription.session_id]
