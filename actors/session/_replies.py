"""The replies tool calls of this process wait for: permission replies, question answers.

A tool call that asked the user something registers its request (``expect``) and waits
(``wait``); a client's reply, once its write succeeded, reaches it (``deliver``).

A reply whose write is reported failed may still be in the store (the fdatasync failed
but the pages reached the file, and the restarted store replays them); a reply refused
because the store holds an answer already names such a reply too. Either puts the request
in doubt (``doubt``): the waiting call wakes and reads the request's durable state once
the store serves again; answered, it goes on with that answer; still pending, it waits on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

import trio

from runtime import StorageError

__all__ = ["AwaitedReplies", "Stored"]

T = TypeVar("T")
STORED_READS: Final = 5  # reads of a request in doubt, each after the store's restart


@dataclass(frozen=True, slots=True)
class Stored(Generic[T]):
    """The answer the store holds for a request."""

    value: T


class AwaitedReplies(Generic[T]):
    """Requests of this process a tool call waits on, by request id, and their replies.

    Args:
        stored_reads: most reads of a request in doubt (each may meet a store restarting).
    """

    def __init__(self, *, stored_reads: int = STORED_READS) -> None:
        if stored_reads < 1:
            raise ValueError("stored_reads must be at least 1")
        self._reads = stored_reads
        self._waiting: dict[str, trio.Event] = {}
        self._replies: dict[str, T] = {}

    def expect(self, request_id: str) -> None:
        """A call will wait for *request_id*: register it before the request is written,
        so a reply arriving at once is not missed. ``forget`` ends it."""
        self._waiting.setdefault(request_id, trio.Event())

    async def wait(self, request_id: str, stored: Callable[[], Awaitable[Stored[T] | None]]) -> T:
        """The reply to *request_id* (registered with ``expect``), once one arrives.

        In doubt, *stored* reads the request's answer from the store (None: still
        pending); a read failing with StorageError is tried again, up to ``stored_reads``
        reads, and the last failure raised. Cancellation propagates (the request stays
        registered until ``forget``: a reply arriving meanwhile is kept for ``answered``).
        """
        while True:
            await self._waiting[request_id].wait()
            if request_id in self._replies:
                return self._replies[request_id]
            self._waiting[request_id] = trio.Event()
            found = await self._read(stored)
            if found is not None:
                return self._replies.setdefault(request_id, found.value)

    async def _read(self, stored: Callable[[], Awaitable[Stored[T] | None]]) -> Stored[T] | None:
        for _ in range(self._reads - 1):
            with contextlib.suppress(StorageError):
                return await stored()
        return await stored()

    def deliver(self, request_id: str, reply: T) -> bool:
        """A recorded reply (here or by another worker) reaches the call waiting for
        *request_id*; the first reply stands. True when a call of this process waits."""
        waiting = self._waiting.get(request_id)
        if waiting is None:
            return False
        self._replies.setdefault(request_id, reply)
        waiting.set()
        return True

    def doubt(self, request_id: str) -> None:
        """A reply to *request_id* failed to write, or was refused as answered: the store
        may hold an answer, which the waiting call (if any) reads."""
        waiting = self._waiting.get(request_id)
        if waiting is not None:
            waiting.set()

    def answered(self, request_id: str) -> bool:
        """Whether a reply to *request_id* reached its waiting call."""
        return request_id in self._replies

    def forget(self, request_id: str) -> None:
        """The call no longer waits for *request_id*: later replies are not kept."""
        self._waiting.pop(request_id, None)
        self._replies.pop(request_id, None)
