"""What a failed drain and a crash leave durable.

A failed drain is recorded as a ``step.failed`` and a ``run.failed`` in one batch
(:func:`failure_events`, written by :func:`record_failure`); what a crash cut short is
closed when the session next activates, or at start-up (:func:`recover_session`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import trio

from actors.session._config import session_model
from actors.session._questions import DEFAULT_QUESTION_EVENTS, admit_late_answers
from actors.session._turn import INTERRUPTED_TOOL
from runtime import StorageError
from runtime import events as ev
from runtime.agents import AgentInfo
from runtime.history import recovery_events
from storage import Append, SessionHistory

if TYPE_CHECKING:
    from actors.session._ports import SessionPorts
    from actors.session._turn import Turn
    from actors.store import StorageActor

__all__ = [
    "RECOVERY_ATTEMPTS",
    "StepLimitExceededError",
    "close_failed_turn",
    "failed_step_start",
    "failure_events",
    "record_drain_failure",
    "record_failure",
    "recover_session",
    "recover_until_written",
    "run_failure",
]

_log = logging.getLogger("kittiwake.session")
_FAILURE_GRACE: Final = 10.0
RECOVERY_ATTEMPTS: Final = 3
"""Tries of one recovery whose write fails, each on the store restarted after the last."""


class StepLimitExceededError(Exception):
    """Work remained after the provider-turn allowance of one drain was spent."""


def failure_events(
    exc: Exception, *, session_id: str, now: int, message_id: str, start: ev.StepStarted | None
) -> list[ev.DurableEvent]:
    """The events that make the drain *exc* failed durable and visible: *start* (the
    start of a new, empty step, when the failure cut none), a ``step.failed`` on step
    *message_id*, and a ``run.failed`` that sets the session's ``last_error``."""
    if isinstance(exc, StepLimitExceededError):
        error = ev.RunError(tag="StepLimitExceededError", message=str(exc))
    else:
        error = ev.RunError(tag="InternalError", message=f"{type(exc).__name__}: {exc}")
    failed = ev.SessionError(message=error.message)
    return [
        *([] if start is None else [start]),
        ev.StepFailed(
            timestamp=now, session_id=session_id, assistant_message_id=message_id, error=failed
        ),
        ev.RunFailed(timestamp=now, session_id=session_id, error=error),
    ]


def failed_step_start(
    ports: SessionPorts, session_id: str, agent: Callable[[], AgentInfo], message_id: str,
    now: int,
) -> ev.StepStarted:  # fmt: skip
    """The start of an empty step *message_id* that carries a failure outside any
    provider turn, with the session's *agent* and model (``build`` and the default model
    when looking them up fails: the failure may be that very lookup)."""
    try:
        info, chosen = ports.session_info(session_id), agent()
        settings = ports.location_for(info.location.directory).settings
        name, model = chosen.name, session_model(info, chosen, settings, ports.default_model)
    except Exception:  # noqa: BLE001 - the failure may be this very lookup
        name, model = "build", ports.default_model
    return ev.StepStarted(
        timestamp=now, session_id=session_id, assistant_message_id=message_id, agent=name,
        model=model,
    )  # fmt: skip


async def record_failure(
    storage: StorageActor, session_id: str, events: list[ev.DurableEvent]
) -> None:
    """Write a failed drain's *events* in one batch, bounded and shielded
    (``_FAILURE_GRACE``); a write that fails or times out is logged, and the next
    drain's recovery closes what stayed open. Never raises."""
    with trio.move_on_after(_FAILURE_GRACE, shield=True):
        try:
            await storage.write(Append(session_id=session_id, events=events))
        except Exception as write_error:  # noqa: BLE001 - logged; recovery closes the rest
            _log.error(
                "could not record the failed drain",
                extra={"session": session_id},
                exc_info=write_error,
            )


async def record_drain_failure(
    ports: SessionPorts, session_id: str, exc: Exception, turn: Turn | None, *,
    turn_open: bool, agent: Callable[[], AgentInfo],
) -> bool:  # fmt: skip
    """Make a failed drain durable and visible: a ``step.failed`` on the step it cut
    (for the turn cap, *turn*'s; else a new, empty step) and a ``run.failed`` that sets
    the session's ``last_error``, in one batch. A failure inside a provider turn (*turn*
    still *turn_open*) was closed by the turn itself; tool calls it left without a result
    are closed by recovery here. True when that recovery ran (the history is recovered).

    Bounded and shielded (:func:`record_failure`, :func:`close_failed_turn`); a write
    that fails is logged, and the next drain's recovery closes what stayed open.
    """
    if turn is not None and turn_open:
        # run_turn closed its step failed (and the actor's append added run.failed) as
        # far as its own bounded write could; what it could not (a tool call whose result
        # was not written), recovery closes from the durable history: now, and if that
        # fails too, at the next drain.
        return await close_failed_turn(ports.storage, session_id, ports.now_ms)
    now, start = ports.now_ms(), None
    if turn is not None and isinstance(exc, StepLimitExceededError):
        message_id = turn.assistant_id
    else:
        message_id = ports.ids.new("msg")
        start = failed_step_start(ports, session_id, agent, message_id, now)
    events = failure_events(exc, session_id=session_id, now=now, message_id=message_id, start=start)
    await record_failure(ports.storage, session_id, events)
    return False


async def close_failed_turn(
    storage: StorageActor, session_id: str, now_ms: Callable[[], int]
) -> bool:
    """Close from the durable history what a failed provider turn left open (a tool call
    whose result was not written), bounded and shielded (``_FAILURE_GRACE``); True once
    recovery ran. Nothing else closes the call before the session next runs, so a failed
    write is tried again (``recover_until_written``); what still fails is logged and left
    to the next drain's recovery. Never raises.
    """
    with trio.move_on_after(_FAILURE_GRACE, shield=True):
        try:
            await recover_until_written(storage, session_id, now_ms)
            return True
        except Exception as recovery_error:  # noqa: BLE001 - the next drain retries
            _log.error(
                "could not close the failed turn's tool calls",
                extra={"session": session_id},
                exc_info=recovery_error,
            )
    return False


async def recover_until_written(
    storage: StorageActor, session_id: str, now_ms: Callable[[], int],
    *, attempts: int = RECOVERY_ATTEMPTS,
) -> bool:  # fmt: skip
    """``recover_session``, tried again while its write fails with StorageError (the store
    failed a commit and restarts; the StorageActor holds the next try until it serves),
    up to *attempts* tries, each logged. Raises the last StorageError; cancellation as
    ``recover_session``."""
    for attempt in range(1, attempts):
        try:
            return await recover_session(storage, session_id, now_ms())
        except StorageError as exc:
            _log.warning(
                "recovery's write failed; trying again on the restarted store",
                extra={"session": session_id, "attempt": attempt},
                exc_info=exc,
            )
    return await recover_session(storage, session_id, now_ms())


async def recover_session(
    storage: StorageActor, session_id: str, now: int,
    *, question_events: int = DEFAULT_QUESTION_EVENTS,
) -> bool:  # fmt: skip
    """Close every provider turn a crash left open in the session's history and mark the
    session as needing a resume when its latest work was cut short
    (``runtime._recovery``); True when anything was written. Durable before it returns.
    A call closed here that had asked a question already answered gets its answers
    admitted as a prompt (``actors.session._questions.admit_late_answers``, reading the last
    *question_events*) before the closing is written, so a crash in between loses
    neither, and again after it for a question answered meanwhile; without a wake: the
    caller drains the session next.

    The caller makes sure no drain of the session runs meanwhile (start-up, or the
    session's own actor before its first drain). Cancellation before the write leaves the
    history as it was; recovery runs again at the next activation.
    """
    info, history = await storage.read(SessionHistory(session_id=session_id))
    if info is None:
        return False
    events = recovery_events(
        session_id,
        history,
        needs_resume=info.needs_resume is True,
        now=now,
        tool_error=INTERRUPTED_TOOL,
    )
    if not events:
        return False
    closed = {e.call_id for e in events if isinstance(e, ev.ToolFailed)}
    admitted, waiting = await admit_late_answers(
        storage, session_id, closed, now, limit=question_events
    )
    await storage.write(Append(session_id=session_id, events=events))
    _log.warning(
        "closed what a crash cut short", extra={"session": session_id, "events": len(events)}
    )
    if waiting:  # answered between the read and the closing: the reply saw the call open
        admitted += (
            await admit_late_answers(storage, session_id, waiting, now, limit=question_events)
        )[0]
    if admitted:
        _log.info(
            "answers to questions of closed calls admitted as prompts",
            extra={"session": session_id, "messages": admitted},
        )
    return True


def run_failure(events: list[ev.DurableEvent], session_id: str, tag: str) -> ev.RunFailed | None:
    """The ``run.failed`` a batch's failed step (a provider error ended the turn) brings
    with it, tagged *tag*, so the session's ``last_error`` shows it; None without one."""
    for event in events:
        if isinstance(event, ev.StepFailed):
            error = ev.RunError(tag=tag, message=event.error.message)
            return ev.RunFailed(timestamp=event.timestamp, session_id=session_id, error=error)
    return None
