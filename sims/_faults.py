"""Which faults a seed injects: swarm testing, a random subset with random weights per seed.

Each fault kind belongs to one place a real system meets it (provider, tool, storage,
clock). A seed enables a random subset (every kind equally likely to be on), gives each
enabled kind a random weight, and fixes the chance that any one opportunity is faulted,
so seeds differ in *what* fails as well as in *when*.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Final

__all__ = ["ALL_FAULTS", "FAULT_GROUPS", "FaultPlan", "choose_faults"]

FAULT_GROUPS: Final[dict[str, tuple[str, ...]]] = {
    "provider": (
        "provider.429",
        "provider.5xx",
        "provider.overflow",
        "provider.stall",
        "provider.cut",
        "provider.malformed",
    ),
    "tool": ("tool.hang", "tool.raise", "tool.slow", "tool.huge", "tool.output_write"),
    "storage": ("storage.fsync", "storage.full", "storage.torn", "storage.crash"),
    "clock": ("clock.jump", "clock.rollover"),
}
ALL_FAULTS: Final = tuple(kind for kinds in FAULT_GROUPS.values() for kind in kinds)


class FaultPlan:
    """The faults one seed may inject, their weights, and how often an opportunity is taken.

    ``pick(group, rng)`` answers, at one opportunity, which enabled fault of *group* (if
    any) happens there. *rng* is the caller's stream, so a plan is pure data.
    """

    def __init__(self, weights: dict[str, float], rate: float) -> None:
        self.weights = weights
        self.rate = rate

    def enabled(self, kind: str) -> bool:
        return kind in self.weights

    def pick(self, group: str, rng: random.Random, *, rate: float | None = None) -> str | None:
        kinds = [k for k in FAULT_GROUPS[group] if k in self.weights]
        if not kinds or rng.random() >= (self.rate if rate is None else rate):
            return None
        return rng.choices(kinds, weights=[self.weights[k] for k in kinds])[0]

    def describe(self) -> str:
        return ",".join(sorted(self.weights)) or "none"


def choose_faults(rng: random.Random, allowed: Iterable[str] = ALL_FAULTS) -> FaultPlan:
    """A random subset of *allowed* (each kind on with probability 1/2) with random
    weights, and a fault rate between 5% and 35% of opportunities."""
    weights = {kind: rng.uniform(0.2, 1.0) for kind in allowed if rng.random() < 0.5}
    return FaultPlan(weights, rng.uniform(0.05, 0.35))
