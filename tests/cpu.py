"""CPU time a test spent: its own process's (every thread) and its child processes' that
have ended and were waited for (and theirs, when they waited for their own).

A bound on the work a test does, which the machine's load leaves alone: on two cores
shared with other work (a load average of 12-15) a test's wall time grows five to eight
times, its CPU time hardly at all. Bound wall time only where waiting is what is tested.
"""

from __future__ import annotations

import resource

__all__ = ["CpuTime"]


def _now() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CpuTime:
    """Started when made; ``spent()`` is the CPU seconds used since."""

    def __init__(self) -> None:
        self._started = _now()

    def spent(self) -> float:
        return _now() - self._started
