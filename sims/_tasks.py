"""Subagent tasks in the simulation: the model starts them (``task``), the runtime runs each
in a child session, and the simulation adopts every child it sees created, so the checks,
the answers to permission requests and the liveness bound cover children as they cover
the clients' own sessions.
"""

from __future__ import annotations

import random
from typing import Final

from runtime import events as ev
from runtime import llm
from storage import StoredEvent

__all__ = ["SUBAGENT", "child_of", "task_call"]

SUBAGENT: Final = "general"
_RATE: Final = 0.08  # of the tool calls a turn makes, when it offers ``task``


def task_call(rng: random.Random, call_id: str, offered: set[str]) -> llm.ToolCall | None:
    """A ``task`` call for the simulation's subagent (about one call in twelve where the
    turn offers it), or None."""
    if "task" not in offered or rng.random() >= _RATE:
        return None
    work = {"description": "side work", "prompt": f"side task {rng.randrange(10_000)}",
            "subagent_type": SUBAGENT}  # fmt: skip
    return llm.ToolCall(call_id=call_id, name="task", input=work)


def child_of(stored: StoredEvent) -> tuple[str, str, str] | None:
    """(child, parent, Location directory) when *stored* created a child session."""
    if stored.type != "session.created":
        return None
    event = ev.decode_event(stored.data)
    assert isinstance(event, ev.SessionCreated)
    parent = event.info.parent_id
    if not isinstance(parent, str):
        return None
    return event.info.id, parent, event.info.location.directory
