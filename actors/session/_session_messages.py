"""What reaches a SessionActor: its mailbox's messages, and an admission's opened activity.

The mailbox carries wakes, runs, interrupts and compaction requests. An activity an
admission opened is handed over by a call (``SessionActor.hand_opened``), never mailed.
"""

from __future__ import annotations

import msgspec

from actors.kernel import Reply
from runtime import events as ev
from runtime.history import HistoryDelta

__all__ = ["CompactSoon", "Interrupt", "Message", "Opened", "Run", "Wake"]


class Wake(msgspec.Struct, frozen=True):
    seq: int


class Run(msgspec.Struct, frozen=True):
    reply: Reply[None]


class Interrupt(msgspec.Struct, frozen=True):
    seq: int
    reply: Reply[None]


class CompactSoon(msgspec.Struct, frozen=True):
    """Compact the session at its next safe boundary (or now, when idle)."""

    reply: Reply[None]


class Opened(msgspec.Struct, frozen=True):
    """An activity opened in the admitting batch (see ``SessionActor.reserve_opening``):
    the rows its promotion promoted, those left pending, and the history delta after it.
    Handed over by ``SessionActor.hand_opened``, not mailed."""

    seq: int
    promoted: list[ev.InputAdmitted]
    pending: list[ev.InputAdmitted]
    delta: HistoryDelta
    base: tuple[int, int]
    """The history (generation, version) the delta was read against."""
    info: ev.SessionInfo | None = None
    """Cluster mode: the session's info as the admitting batch read it, under the
    session's lock (``AdmitAndOpen``); the drain it opens starts from it instead of
    reading the session again. None in one process (nothing else changes the session)."""


Message = Wake | Run | Interrupt | CompactSoon
