"""Crash recovery: the events that close what a crash cut short in a session's history.

Pure. A crash (``kill -9``, power loss) can leave a provider turn open: its assistant
message has no ``finish`` and no ``time.completed``, and its local tools read
``pending`` or ``running`` forever. Recovery closes each such turn the way an interrupt
does (every unfinished tool fails "Tool execution interrupted", the step ends
``finish: "interrupted"``) and, when the session's latest work was cut short, marks it
as needing an explicit resume (``session.resume.needed``): whether the provider had
already been asked is unknown, so nothing is retried by itself (``spec/session.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import UNSET

from runtime import _messages as m
from runtime import _schema as ev

__all__ = ["cut_short", "needs_recovery", "recovery_events"]


def cut_short(message: m.SessionMessage) -> bool:
    """True when *message*, the latest conversational message of a session, shows work
    that was cut short: a promoted prompt with no answer, an assistant turn left open, or
    one that ended asking for tool results with no turn after it (and no failure)."""
    if isinstance(message, m.UserMessage):
        return True
    if not isinstance(message, m.AssistantMessage):
        return False
    if message.time.completed is UNSET:
        return True
    return message.finish == "tool-calls" and message.error is UNSET


def needs_recovery(message: m.SessionMessage) -> bool:
    """True when *message*, the latest conversational message of a session, shows
    something :func:`recovery_events` closes: work cut short (:func:`cut_short`), or a
    tool call left without a result in a closed step (a turn that failed writing the
    result, whose own closing by recovery a crash then cut: nothing else would close it
    until the session next runs)."""
    if cut_short(message):
        return True
    return isinstance(message, m.AssistantMessage) and any(map(_without_result, message.content))


def _without_result(part: m.AssistantContent) -> bool:
    """A tool call whose result was never recorded (pending or still running)."""
    return isinstance(part, m.AssistantTool) and isinstance(
        part.state, m.ToolPending | m.ToolRunning
    )


def _latest_conversational(
    history: Sequence[tuple[int, m.SessionMessage]],
) -> m.SessionMessage | None:
    for _, message in reversed(history):
        if isinstance(message, m.UserMessage | m.AssistantMessage | m.SyntheticMessage):
            return message
    return None


def recovery_events(
    session_id: str, history: Sequence[tuple[int, m.SessionMessage]], *, needs_resume: bool,
    now: int, tool_error: str,
) -> list[ev.DurableEvent]:  # fmt: skip
    """The events that close every turn a crash left open in *history* (chronological
    ``(seq, message)`` rows) and every tool call left without a result (in a closed step
    too: a turn that failed writing a result), then mark the session as needing a resume
    when its latest work was cut short and it is not marked already (*needs_resume*).
    Empty when there is nothing to recover. Each unfinished local or hosted tool fails
    with *tool_error*.
    """
    events: list[ev.DurableEvent] = []
    for _, message in history:
        if not isinstance(message, m.AssistantMessage):
            continue
        # A closed step can still hold a call without a result: the turn failed after
        # the call started (a storage write of its result failed) and closed the step
        # as far as its own write could. The call is closed the same way.
        open_step = message.time.completed is UNSET
        for part in message.content:
            if _without_result(part):
                events.append(
                    ev.ToolFailed(
                        timestamp=now,
                        session_id=session_id,
                        assistant_message_id=message.id,
                        call_id=part.id,
                        error=ev.SessionError(message=tool_error),
                    )  # fmt: skip
                )
        if not open_step:
            continue
        events.append(
            ev.StepEnded(
                timestamp=now,
                session_id=session_id,
                assistant_message_id=message.id,
                finish="interrupted",
            )  # fmt: skip
        )
    latest = _latest_conversational(history)
    if not needs_resume and latest is not None and cut_short(latest):
        events.append(ev.ResumeNeeded(timestamp=now, session_id=session_id))
    return events
