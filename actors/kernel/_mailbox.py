"""Mailboxes (counted trio memory channels) and one-shot replies.

Every mailbox has an explicit bound, or ``math.inf`` with a written reason.
"""

from __future__ import annotations

import math
from types import TracebackType
from typing import Any, Generic, TypeVar, final

import msgspec
import trio

__all__ = ["Mailbox", "MailboxStatistics", "Reply", "open_mailbox"]

T = TypeVar("T")


class MailboxStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of one mailbox, for the inspector."""

    depth: int
    """Messages buffered now."""
    bound: int | None
    """The buffer's bound; ``None`` when unbounded."""
    peak_depth: int
    """The most messages ever buffered at once."""
    blocked_senders: int
    """Tasks waiting in ``send`` because the buffer is full."""
    waiting_receivers: int
    """Tasks waiting in ``receive`` because the buffer is empty."""
    messages_in: int
    """Messages accepted since the mailbox was opened."""
    messages_out: int
    """Messages received since the mailbox was opened."""
    closed: bool
    """Whether the receiving side is closed (senders get ``BrokenResourceError``)."""
    unbounded_because: str | None = None
    """Why the mailbox has no bound, when it has none."""


def open_mailbox(max_buffer: int | float, *, unbounded_because: str | None = None) -> Mailbox[Any]:
    """Open a mailbox that buffers up to *max_buffer* messages.

    Args:
        max_buffer: a non-negative int, or ``math.inf`` for no bound.
        unbounded_because: required with ``math.inf`` and refused otherwise; says
            why the queue cannot grow without limit in practice.

    Raises:
        TypeError: unbounded without a reason, or a reason given for a bound.
        ValueError: the bound is negative, not an int, or the reason is blank.
    """
    if max_buffer == math.inf:
        if unbounded_because is None:
            raise TypeError("an unbounded mailbox needs unbounded_because='<reason>'")
        if not unbounded_because.strip():
            raise ValueError("unbounded_because must say why, not be blank")
    else:
        if unbounded_because is not None:
            raise TypeError("unbounded_because is only for max_buffer=math.inf")
        if isinstance(max_buffer, bool) or not isinstance(max_buffer, int) or max_buffer < 0:
            raise ValueError(f"max_buffer must be an int >= 0 or math.inf, got {max_buffer!r}")
    return Mailbox(max_buffer, unbounded_because)


@final
class Mailbox(Generic[T]):
    """A bounded FIFO of messages for one actor, with counters.

    Made by :func:`open_mailbox`. Senders and the owning actor share the object.
    Closing it closes the receiving side: queued messages are dropped and senders,
    blocked or new, get ``trio.BrokenResourceError``. Usable as a context manager
    that closes it on exit.
    """

    def __init__(self, max_buffer: int | float, unbounded_because: str | None) -> None:
        self._send, self._receive = trio.open_memory_channel[T](max_buffer)
        self._unbounded_because = unbounded_because
        self._peak = 0
        self._in = 0
        self._out = 0
        self._closed = False

    async def send(self, message: T) -> None:
        """Queue *message*, waiting while the mailbox is full.

        Raises:
            trio.BrokenResourceError: the mailbox was closed (its actor is gone).
        """
        await self._send.send(message)
        self._note_in()

    def send_nowait(self, message: T) -> None:
        """Queue *message* or fail at once.

        Raises:
            trio.WouldBlock: the mailbox is full.
            trio.BrokenResourceError: the mailbox was closed.
        """
        self._send.send_nowait(message)
        self._note_in()

    async def receive(self) -> T:
        """Take the oldest message, waiting for one.

        Raises:
            trio.ClosedResourceError: the mailbox was closed.
        """
        message = await self._receive.receive()
        self._out += 1
        return message

    def receive_nowait(self) -> T:
        """Take the oldest message or fail at once.

        Raises:
            trio.WouldBlock: the mailbox is empty.
            trio.ClosedResourceError: the mailbox was closed.
        """
        message = self._receive.receive_nowait()
        self._out += 1
        return message

    def close(self) -> None:
        """Close the receiving side; idempotent."""
        self._closed = True
        self._receive.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def depth(self) -> int:
        """Messages queued and not yet received."""
        return self._in - self._out

    @property
    def sent(self) -> int:
        """Messages accepted since the mailbox was opened: the sequence number of the
        latest one (the first is 1). A message counts once its ``send`` returned."""
        return self._in

    @property
    def received(self) -> int:
        """Messages received since the mailbox was opened: every message up to this
        sequence number was taken (mailboxes are FIFO)."""
        return self._out

    def statistics(self) -> MailboxStatistics:
        """Return a snapshot of depth, bound, peak, waiters and counters."""
        raw = self._send.statistics()
        bound = raw.max_buffer_size
        return MailboxStatistics(
            depth=raw.current_buffer_used,
            bound=None if bound == math.inf else int(bound),
            peak_depth=self._peak,
            blocked_senders=raw.tasks_waiting_send,
            waiting_receivers=raw.tasks_waiting_receive,
            messages_in=self._in,
            messages_out=self._out,
            closed=self._closed,
            unbounded_because=self._unbounded_because,
        )

    def __enter__(self) -> Mailbox[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _note_in(self) -> None:
        self._in += 1
        self._peak = max(self._peak, self._send.statistics().current_buffer_used)


@final
class Reply(Generic[T]):
    """A one-shot slot a caller sends inside a message and awaits.

    The actor answers once with :meth:`send` or :meth:`fail`. An answer to a slot the
    caller abandoned, or the kernel already failed because the actor crashed, is
    dropped silently: answering never hurts the actor. Answering twice is a bug.
    """

    __slots__ = ("_answered", "_done", "_error", "_value")

    def __init__(self) -> None:
        self._done = trio.Event()
        self._answered = False
        self._value: T | None = None
        self._error: BaseException | None = None

    @property
    def settled(self) -> bool:
        """Whether the slot holds an answer or was failed or abandoned."""
        return self._done.is_set()

    def send(self, value: T) -> None:
        """Answer with *value*.

        Raises:
            RuntimeError: the actor already answered this slot.
        """
        if self._claim():
            self._value = value
            self._done.set()

    def fail(self, error: Exception) -> None:
        """Answer with *error*, which the caller's ``wait`` raises.

        Raises:
            RuntimeError: the actor already answered this slot.
        """
        if self._claim():
            self._error = error
            self._done.set()

    async def wait(self) -> T:
        """Wait for the answer and return it, or raise the error it carries."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def _claim(self) -> bool:
        if self._answered:
            raise RuntimeError("this reply was already answered")
        self._answered = True
        return not self._done.is_set()

    def _settle(self, error: BaseException) -> None:
        """Fail the slot on the kernel's behalf unless it is settled already."""
        if not self._done.is_set():
            self._error = error
            self._done.set()

    def _abandon(self) -> None:
        """Mark the slot as no longer awaited (the caller left)."""
        self._settle(trio.ClosedResourceError("the caller abandoned this reply"))
