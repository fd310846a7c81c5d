"""Running blocking filesystem work from trio tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import trio

from runtime.tools._model import ToolEnvironment

__all__ = ["run_blocking"]

T = TypeVar("T")


async def run_blocking(env: ToolEnvironment, fn: Callable[[], T]) -> T:
    """Run *fn* in a worker thread, or inline (after a checkpoint) when ``env.offload_io`` is off.

    Cancellation abandons the worker thread; *fn* still runs to its end.
    """
    if env.offload_io:
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)
    await trio.lowlevel.checkpoint()
    return fn()
