"""Paired off / on measurements on a shared, noisy machine.

A benchmark runs telemetry off and on back to back, ``pairs`` times, swapping which goes
first each time (so drift in the machine's load falls on both sides alike), and reports:
each side's median, the median of the per-pair ratios with its quartiles and a 90%
confidence interval (distribution-free: order statistics of the sorted ratios, the
binomial ranks of the median), and the ratio of the two sides' lower quartiles (a run is slowed by what else runs, never sped up, so the
faster runs are the closer to the cost of the work itself).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["first_is_off", "median_interval", "pair_report"]


def first_is_off(pair: int) -> bool:
    """Whether pair number *pair* runs telemetry off first (every other pair)."""
    return pair % 2 == 0


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def median_interval(ordered: Sequence[float]) -> tuple[float, float]:
    """A 90% confidence interval of the median of *ordered* (sorted): the order
    statistics at ranks n/2 -+ 1.645 sqrt(n)/2 (the normal approximation of the binomial)."""
    n = len(ordered)
    half = 1.645 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half))
    high = min(n - 1, math.ceil(n / 2 + half) - 1)
    return ordered[low], ordered[high]


def pair_report(
    label: str, off: Sequence[float], on: Sequence[float], *, unit: str, scale: float = 1.0,
    higher_is_better: bool = False,
) -> str:  # fmt: skip
    """One line: medians, the median paired overhead (+ is worse) with its quartiles, and
    the overhead of the lower quartiles (upper ones when *higher_is_better*)."""

    def overhead(a: float, b: float) -> float:  # how much worse *b* (on) is than *a* (off)
        return (a / b - 1) if higher_is_better else (b / a - 1)

    ratios = sorted(overhead(a, b) for a, b in zip(off, on, strict=True))
    r1, r2, r3 = _quartiles(ratios)
    c1, c2 = median_interval(ratios)
    off_q, on_q = _quartiles(off), _quartiles(on)
    best = overhead(off_q[2], on_q[2]) if higher_is_better else overhead(off_q[0], on_q[0])
    return (
        f"{label}: off {off_q[1] * scale:.2f} {unit}, on {on_q[1] * scale:.2f} {unit} (medians);"
        f" paired overhead median {r2:+.1%} (90% interval {c1:+.1%} .. {c2:+.1%}; quartiles"
        f" {r1:+.1%} .. {r3:+.1%}; {len(ratios)} pairs); faster quartile {best:+.1%}"
    )
