"""Waiting in tests for a condition or an event, never for a guessed length of time."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["eventually", "published", "serving_url"]


class _Watch(trio.abc.Instrument):
    """Sets *done* after the first task step that leaves *predicate* true."""

    def __init__(self, predicate: Callable[[], bool], done: trio.Event) -> None:
        self.predicate, self.done = predicate, done

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if not self.done.is_set() and self.predicate():
            self.done.set()


async def eventually(predicate: Callable[[], bool], *, within: float = 10) -> None:
    """Wait until *predicate* holds; fail after *within* seconds.

    State in this process changes only in a task's step (a worker thread's result too
    arrives as one), so *predicate* is checked after every step: no polling interval,
    and the wait ends at the step that made it true. Not for state another process
    changes on its own.
    """
    if predicate():
        return
    done = trio.Event()
    watch = _Watch(predicate, done)
    trio.lowlevel.add_instrument(watch)
    try:
        with trio.fail_after(within):
            await done.wait()
    finally:
        trio.lowlevel.remove_instrument(watch)


async def published(sub: Any, event_type: str) -> Any:
    """The next stored event of *event_type* (its type tag) on the hub subscription *sub*;
    fails after ten seconds."""
    with trio.fail_after(10):
        while True:
            item = await sub.receive()
            if getattr(item, "type", None) == event_type:
                return item


async def serving_url(server: trio.Process) -> str:
    """The URL a ``kittiwake serve`` child prints on its standard output once it serves
    (``kittiwake: serving http://...``). Fails if its output ends first or 30 s pass."""
    assert server.stdout is not None
    out = b""
    with trio.fail_after(30):
        while b"serving" not in out:
            chunk = await server.stdout.receive_some(4096)
            assert chunk, out.decode()
            out += chunk
    found = re.search(rb"serving (https?://\S+)", out)
    assert found is not None, out.decode()
    return found.group(1).decode()
