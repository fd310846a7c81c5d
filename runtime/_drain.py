"""The drain planner, sans-IO: what one drain of a session does next.

A drain works through a session's durable inbox in activities. An activity opens by
promoting pending steers, else the oldest queued prompt (:class:`Open`), then runs
provider turns (:class:`RequestTurn`). After a turn it continues while local tools
ran or steers arrived, promoting those steers at the safe boundary between provider
turns (:class:`Promote`); each promotion resets the provider-turn allowance. An
activity that needs a turn past the allowance fails the drain durably
(:class:`Fail` with :class:`StepLimitExceeded`). When an activity that ran a turn
ends with a queued prompt pending, that prompt opens the next activity, its own;
otherwise the drain ends (:class:`Idle`).

The planner holds no I/O: :func:`begin_drain` gives the first effect, and
:func:`plan` folds what performing an effect reported (:class:`Promoted`,
:class:`Blocked`, :class:`TurnEnded`) into the next state and effect. The shell
(the SessionActor) performs the effects and reports back; which rows a promotion
takes is the inbox's rule, applied in the promoting write.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = [
    "Blocked",
    "DrainEffect",
    "DrainInput",
    "DrainPlan",
    "Fail",
    "Idle",
    "Open",
    "Promote",
    "Promoted",
    "RequestTurn",
    "StepLimitExceeded",
    "TurnEnded",
    "begin_drain",
    "plan",
]

Awaiting = Literal["promotion", "turn", "done"]


class DrainPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Where one drain stands.

    ``force`` makes the current activity run a provider turn even when its opening
    promoted nothing (an explicit resume); it holds until that first turn. ``step`` counts
    the provider turns since the activity's last promotion; ``activities`` the activities
    opened so far. ``awaiting`` names the report the last effect asked for (``"done"`` once
    the drain ended).
    """

    force: bool = False
    step: int = 0
    activities: int = 1
    awaiting: Awaiting = "promotion"


# -- effects -----------------------------------------------------------------------------


class Open(msgspec.Struct, frozen=True, tag_field="type", tag="open"):
    """Open an activity: promote the pending steers, else the oldest queued prompt.
    Answer with :class:`Promoted` or :class:`Blocked`."""


class Promote(msgspec.Struct, frozen=True, tag_field="type", tag="promote"):
    """Promote the pending steers at this boundary between provider turns (queued
    prompts wait for their own activity). Answer with :class:`Promoted` or :class:`Blocked`."""


class RequestTurn(msgspec.Struct, frozen=True, tag_field="type", tag="request_turn"):
    """Run provider turn *step* of *max_turns* in the activity; the last one offers no
    tools. Answer with :class:`TurnEnded`."""

    step: int
    max_turns: int

    @property
    def final(self) -> bool:
        return self.step >= self.max_turns


class StepLimitExceeded(msgspec.Struct, frozen=True, tag_field="type", tag="step_limit"):
    """Work remained after *max_turns* provider turns since the activity's last promotion."""

    max_turns: int

    @property
    def message(self) -> str:
        return f"Work remained after {self.max_turns} provider turns"


class Fail(msgspec.Struct, frozen=True, tag_field="type", tag="fail"):
    """End the drain as failed, durably (``step.failed`` and ``session.run.failed``)."""

    reason: StepLimitExceeded


class Idle(msgspec.Struct, frozen=True, tag_field="type", tag="idle"):
    """The drain is done: nothing it may take is left."""


DrainEffect = Open | Promote | RequestTurn | Fail | Idle

# -- reports -----------------------------------------------------------------------------


class Promoted(msgspec.Struct, frozen=True, tag_field="type", tag="promoted"):
    """An :class:`Open` or :class:`Promote` promoted *count* rows; *max_turns* is the
    provider-turn allowance as configured now (the agent's ``steps``, else the runtime's)."""

    count: int
    max_turns: int


class Blocked(msgspec.Struct, frozen=True, tag_field="type", tag="blocked"):
    """Nothing could be promoted: the session's initial context is unavailable."""


class TurnEnded(msgspec.Struct, frozen=True, tag_field="type", tag="turn_ended"):
    """A provider turn ended: whether it *failed*, how many local tools it ran, and
    whether steers and queued prompts are pending after its last write."""

    failed: bool = False
    local_tools: int = 0
    steers_pending: bool = False
    queued_pending: bool = False


DrainInput = Promoted | Blocked | TurnEnded

_IDLE = Idle()
_OPEN = Open()
_PROMOTE = Promote()
_BEGIN = {False: DrainPlan(), True: DrainPlan(force=True)}


def begin_drain(*, force: bool) -> tuple[DrainPlan, DrainEffect]:
    """A new drain: its state and first effect, opening its first activity. With
    *force* (an explicit resume) the first activity runs a provider turn even if its
    opening promotes nothing."""
    return _BEGIN[force], _OPEN


def plan(state: DrainPlan, report: DrainInput) -> tuple[DrainPlan, DrainEffect]:
    """Fold *report* (what performing the last effect gave) into the next state and effect.

    Raises:
        ValueError: *report* does not answer the last effect (the drain ended, or a
            turn's end was reported for a promotion, or the reverse).
    """
    awaiting = state.awaiting
    if isinstance(report, TurnEnded):
        if awaiting != "turn":
            raise ValueError(f"a turn's end reported while awaiting {awaiting}")
        if report.failed or not (report.local_tools or report.steers_pending):
            return _end_activity(state, queued_pending=report.queued_pending)
        return msgspec.structs.replace(state, awaiting="promotion"), _PROMOTE
    if awaiting != "promotion":
        raise ValueError(f"a promotion's result reported while awaiting {awaiting}")
    if isinstance(report, Blocked):
        return msgspec.structs.replace(state, awaiting="done"), _IDLE
    step = 0 if report.count else state.step
    if step == 0 and not report.count and not state.force:
        # An opening that found nothing to take (a later boundary always has step > 0).
        return msgspec.structs.replace(state, awaiting="done"), _IDLE
    step += 1
    if step > report.max_turns:
        failed = StepLimitExceeded(max_turns=report.max_turns)
        return msgspec.structs.replace(state, step=step, awaiting="done"), Fail(reason=failed)
    turn = RequestTurn(step=step, max_turns=report.max_turns)
    return DrainPlan(step=step, activities=state.activities, awaiting="turn"), turn


def _end_activity(state: DrainPlan, *, queued_pending: bool) -> tuple[DrainPlan, DrainEffect]:
    """The activity ran its last turn: open the next queued prompt as its own
    activity, else end the drain."""
    if queued_pending:
        return DrainPlan(activities=state.activities + 1), _OPEN
    return msgspec.structs.replace(state, awaiting="done"), _IDLE
