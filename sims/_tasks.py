"""Subagent tasks in the simulation: the model starts them (``task``) or continues an
earlier one (``task_id``, read from an earlier task's result, as a model reads it; now and
then one the session does not have), the runtime runs each in a child session, and the
simulation adopts every child it sees created, so the checks, the answers to permission
requests and the liveness bound cover children as they cover the clients' own sessions.
"""

from __future__ import annotations

import random
import re
from typing import Final

from runtime import events as ev
from runtime import llm
from storage import StoredEvent

__all__ = ["SUBAGENT", "child_of", "earlier_tasks", "task_call"]

SUBAGENT: Final = "general"
_RATE: Final = 0.08  # of the tool calls a turn makes, when it offers ``task``
_CONTINUE: Final = 0.2  # of the tool calls, when earlier task results name task ids
_FOREIGN: Final = 0.1  # of the continuations: a task id the session does not have
_TASK_ID: Final = re.compile(r"task_id: (ses_[0-9A-Za-z]+)")
_NO_SUCH_TASK: Final = "ses_00000000000000nosuchtask0"


def earlier_tasks(request: llm.LLMRequest) -> list[str]:
    """The task ids that earlier ``task`` results in *request* name, oldest first."""
    found: list[str] = []
    for message in request.messages:
        if not isinstance(message, llm.ToolMessage):
            continue
        for part in message.content:
            for text in (p.text for p in part.content if isinstance(p, llm.TextPart)):
                found += [t for t in _TASK_ID.findall(text) if t not in found]
    return found


def task_call(
    rng: random.Random, call_id: str, offered: set[str], earlier: list[str]
) -> llm.ToolCall | None:
    """A ``task`` call for the simulation's subagent where the turn offers it, or None:
    with *earlier* task ids, about one call in five continues one of them (a tenth of
    those name a task the session does not have); otherwise about one in twelve starts
    a new task."""
    if "task" not in offered:
        return None
    if earlier and rng.random() < _CONTINUE:
        resumed = _NO_SUCH_TASK if rng.random() < _FOREIGN else rng.choice(earlier)
    elif rng.random() < _RATE:
        resumed = None
    else:
        return None
    work = {"description": "side work", "prompt": f"side task {rng.randrange(10_000)}",
            "subagent_type": SUBAGENT}  # fmt: skip
    if resumed is not None:
        work["task_id"] = resumed
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
