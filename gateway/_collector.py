"""The cyclic garbage collector of a ``kittiwake`` process once start-up is done.

The launcher (``gateway/__main__.py``) pauses the collector while start-up builds the
objects that live as long as the process; :func:`settle_collector` then freezes them (later
collections skip them) and resumes it. A serving process also lets the young generation
grow to ``SERVED_YOUNG_THRESHOLD`` objects between collections: a collection walks every
young object still alive, and a server has thousands alive at any moment (the tasks,
requests and turns in flight), so at Python's default (700) it walked them every two or
three prompts: 0.6 ms of CPU per prompt against 0.15 at this threshold, measured at a load
of 12 (``docs/benchmarks.md``, "Per-prompt CPU: the admission's read and the collector"). Cyclic garbage then waits for at most that many
allocations before it is freed.
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["SERVED_YOUNG_THRESHOLD", "settle_collector"]

SERVED_YOUNG_THRESHOLD: Final = 10_000
"""Net allocations of tracked objects between two young-generation collections in a
serving process (Python's default is 700); the older generations keep theirs."""


def settle_collector(*, serving: bool) -> None:
    """Freeze every object alive now (start-up's, kept for the process's life) out of
    later collections and enable the collector; when *serving*, with the young
    generation's threshold at ``SERVED_YOUNG_THRESHOLD``. Cannot fail."""
    gc.freeze()
    if serving:
        _, middle, old = gc.get_threshold()
        gc.set_threshold(SERVED_YOUNG_THRESHOLD, middle, old)
    gc.enable()
