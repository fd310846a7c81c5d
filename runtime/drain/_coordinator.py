"""The per-session drain lane, sans-IO: wake coalescing, run upgrades, interrupt barriers.

One lane per session. At most one drain is active and at most one follow-up is
pending; wakes coalesce into it keeping the highest seq, a run upgrades it. An
interrupt sets a barrier seq: pending wakes at or below it are dropped, and the
active drain is stopped unless it was started by a wake newer than the barrier.
A wake for whatever the inbox holds (:data:`WAKE_ANY`: after a restart, or when a
passivated actor is started again) is dropped by no barrier, and the drain it starts
is older than every interrupt that arrives while it runs.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

__all__ = ["DrainMode", "Lane", "LaneAction", "WAKE_ANY"]

WAKE_ANY: Final = 1 << 61
"""The seq of a wake for whatever the inbox holds, when no admission's seq is known."""

DrainMode = Literal["wake", "run"]
LaneAction = Literal["start", "queued", "dropped", "cancel", "noop"]


class Lane(msgspec.Struct, kw_only=True):
    """The coordination state of one session's drain chain."""

    active: DrainMode | None = None
    active_seq: int = -1
    pending: DrainMode | None = None
    pending_seq: int = -1
    barrier: int = -1
    drains: int = 0

    def wake(self, seq: int) -> LaneAction:
        """Report durable inbox work at *seq*."""
        if seq <= self.barrier:
            return "dropped"
        if self.active is None:
            self._activate("wake", seq)
            return "start"
        if self.pending != "run":
            self.pending = "wake"
        self.pending_seq = max(self.pending_seq, seq)
        return "queued"

    def run(self) -> LaneAction:
        """Ask for an explicit resume: start a drain, or upgrade the follow-up to a run."""
        if self.active is None:
            self._activate("run", self.barrier)
            return "start"
        self.pending = "run"
        return "queued"

    def interrupt(self, seq: int) -> LaneAction:
        """Set the barrier at *seq*; say whether the active drain must be cancelled."""
        self.barrier = max(self.barrier, seq)
        if self.pending == "wake" and self.pending_seq <= self.barrier:
            self.pending, self.pending_seq = None, -1
        elif self.pending == "run":
            self.pending, self.pending_seq = None, -1
        if self.active is None:
            return "noop"
        if self.active == "wake" and self.barrier < self.active_seq < WAKE_ANY:
            return "noop"  # started for input admitted after the interrupt
        return "cancel"

    def finished(self) -> DrainMode | None:
        """The active drain ended; return the follow-up to start now, if any."""
        self.active, self.active_seq = None, -1
        follow, seq = self.pending, self.pending_seq
        self.pending, self.pending_seq = None, -1
        if follow is not None:
            self._activate(follow, seq)
        return follow

    def stand_down(self) -> None:
        """End the active drain and drop its follow-up (another worker drives the session,
        in cluster mode, and hears of that work from the store)."""
        self.active, self.active_seq = None, -1
        self.pending, self.pending_seq = None, -1

    @property
    def idle(self) -> bool:
        return self.active is None and self.pending is None

    def _activate(self, mode: DrainMode, seq: int) -> None:
        self.active, self.active_seq = mode, seq
        self.drains += 1
