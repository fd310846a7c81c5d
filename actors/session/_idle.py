"""A SessionActor's idle waits: each a reply, answered once the actor has handled its
mailbox up to the sequence number the wait was registered with and its lane is idle
(``SessionActor.idle_waiter``). Sans-IO: the actor says what holds."""

from __future__ import annotations

from collections.abc import Callable

from actors.kernel import Reply

__all__ = ["IdleWaits"]


class IdleWaits:
    """The idle waits of one actor, each with the mailbox sequence number it waits to see
    handled."""

    def __init__(self) -> None:
        self._waits: list[tuple[int, Reply[None]]] = []

    def __bool__(self) -> bool:
        return bool(self._waits)

    def add(self, after: int) -> Reply[None]:
        """A new wait for the messages up to *after*; its reply."""
        reply: Reply[None] = Reply()
        self._waits.append((after, reply))
        return reply

    def answer(self, idle_through: Callable[[int], bool]) -> None:
        """Answer every wait whose sequence number *idle_through* says the actor is idle
        through; keep the others. Never raises (a reply nobody awaits any more is
        dropped as it is answered)."""
        waiting, self._waits = self._waits, []
        for after, reply in waiting:
            if idle_through(after):
                reply.send(None)
            else:
                self._waits.append((after, reply))
