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

Compaction is planned here too. A turn the shell found over the request budget
(:class:`OverBudget`, reported instead of running it) is preceded by an automatic
:class:`Compact`, then requested again, once: a turn that already compacted is never
over budget again. A turn the provider rejected as context overflow before any output
(``TurnEnded.overflow``) compacts once and is rebuilt with its one remaining attempt;
a second overflow, or a compaction that did not complete, ends the activity like any
failed turn. A manual compaction runs at the next safe boundary (``Promoted.compact``),
before that turn, or first thing in a drain begun with ``compact``.

The planner holds no I/O: :func:`begin_drain` gives the first effect, and
:func:`plan` folds what performing an effect reported (:class:`Promoted`,
:class:`Blocked`, :class:`TurnEnded`, :class:`OverBudget`, :class:`Compacted`) into
the next state and effect. The shell
(the SessionActor) performs the effects and reports back; which rows a promotion
takes is the inbox's rule, applied in the promoting write.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = [
    "Blocked",
    "Compact",
    "Compacted",
    "DrainEffect",
    "DrainInput",
    "DrainPlan",
    "Fail",
    "Idle",
    "Open",
    "OverBudget",
    "Promote",
    "Promoted",
    "RequestTurn",
    "StepLimitExceeded",
    "TurnEnded",
    "begin_drain",
    "plan",
]

Awaiting = Literal["promotion", "turn", "compaction", "done"]


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
    turn: RequestTurn | None = None
    """While a compaction runs: the turn to request once it is done (None: open)."""
    overflow: bool = False
    """While a compaction runs: it follows a context overflow of ``turn``."""
    queued_pending: bool = False
    """While an overflow's compaction runs: whether queued prompts were pending."""


# -- effects -----------------------------------------------------------------------------


class Open(msgspec.Struct, frozen=True, tag_field="type", tag="open"):
    """Open an activity: promote the pending steers, else the oldest queued prompt.
    Answer with :class:`Promoted` or :class:`Blocked`."""


class Promote(msgspec.Struct, frozen=True, tag_field="type", tag="promote"):
    """Promote the pending steers at this boundary between provider turns (queued
    prompts wait for their own activity). Answer with :class:`Promoted` or :class:`Blocked`."""


class RequestTurn(msgspec.Struct, frozen=True, tag_field="type", tag="request_turn"):
    """Run provider turn *step* of *max_turns* in the activity; the last one offers no
    tools. Answer with :class:`TurnEnded`, or, when the request is over budget and
    *compacted* is False, with :class:`OverBudget` instead of running it.

    *compacted*: this logical turn already compacted (its estimate is not checked
    again, and a context overflow is final)."""

    step: int
    max_turns: int
    compacted: bool = False

    @property
    def final(self) -> bool:
        return self.step >= self.max_turns


CompactionReason = Literal["auto", "manual"]


class Compact(msgspec.Struct, frozen=True, tag_field="type", tag="compact"):
    """Compact the session's history into a checkpoint now (*overflow*: after the
    provider rejected the turn as too long). Answer with :class:`Compacted`."""

    reason: CompactionReason
    overflow: bool = False


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


DrainEffect = Open | Promote | RequestTurn | Compact | Fail | Idle

# -- reports -----------------------------------------------------------------------------


class Promoted(msgspec.Struct, frozen=True, tag_field="type", tag="promoted"):
    """An :class:`Open` or :class:`Promote` promoted *count* rows; *max_turns* is the
    provider-turn allowance as configured now (the agent's ``steps``, else the runtime's);
    *compact*: a manual compaction was asked for and waits for this boundary."""

    count: int
    max_turns: int
    compact: bool = False


class Blocked(msgspec.Struct, frozen=True, tag_field="type", tag="blocked"):
    """Nothing could be promoted: the session's initial context is unavailable."""


class TurnEnded(msgspec.Struct, frozen=True, tag_field="type", tag="turn_ended"):
    """A provider turn ended: whether it *failed*, how many local tools it ran, and
    whether steers and queued prompts are pending after its last write."""

    failed: bool = False
    local_tools: int = 0
    steers_pending: bool = False
    queued_pending: bool = False
    overflow: bool = False
    """The provider rejected the request as context overflow before any output."""


class OverBudget(msgspec.Struct, frozen=True, tag_field="type", tag="over_budget"):
    """The turn was not run: its estimated request is over the model's budget and older
    complete turns can be compacted."""


class Compacted(msgspec.Struct, frozen=True, tag_field="type", tag="compacted"):
    """A :class:`Compact` ended: whether a checkpoint was *completed* (False: it failed,
    or there was nothing to compact)."""

    completed: bool


DrainInput = Promoted | Blocked | TurnEnded | OverBudget | Compacted

_IDLE = Idle()
_OPEN = Open()
_PROMOTE = Promote()
_BEGIN = {False: DrainPlan(), True: DrainPlan(force=True)}


def begin_drain(*, force: bool, compact: bool = False) -> tuple[DrainPlan, DrainEffect]:
    """A new drain: its state and first effect, opening its first activity. With
    *force* (an explicit resume) the first activity runs a provider turn even if its
    opening promotes nothing. With *compact* (a manual compaction was asked for) it
    compacts first, then opens."""
    if compact:
        state = msgspec.structs.replace(_BEGIN[force], awaiting="compaction")
        return state, Compact(reason="manual")
    return _BEGIN[force], _OPEN


def plan(state: DrainPlan, report: DrainInput) -> tuple[DrainPlan, DrainEffect]:
    """Fold *report* (what performing the last effect gave) into the next state and effect.

    Raises:
        ValueError: *report* does not answer the last effect (the drain ended, or a
            turn's end was reported for a promotion, or the reverse).
    """
    awaiting = state.awaiting
    if isinstance(report, Compacted):
        return _after_compaction(state, report)
    if isinstance(report, OverBudget):
        if awaiting != "turn" or state.turn is None or state.turn.compacted:
            raise ValueError(f"an over-budget turn reported while awaiting {awaiting}")
        again = msgspec.structs.replace(state.turn, compacted=True)
        return _compacting(state, again), Compact(reason="auto")
    if isinstance(report, TurnEnded):
        if awaiting != "turn":
            raise ValueError(f"a turn's end reported while awaiting {awaiting}")
        turn = state.turn
        if report.overflow and turn is not None and not turn.compacted:
            again = msgspec.structs.replace(turn, compacted=True)
            compacting = _compacting(state, again)
            compacting = msgspec.structs.replace(
                compacting, overflow=True, queued_pending=report.queued_pending
            )
            return compacting, Compact(reason="auto", overflow=True)
        if report.failed or not (report.local_tools or report.steers_pending):
            return _end_activity(state, queued_pending=report.queued_pending)
        return msgspec.structs.replace(state, awaiting="promotion", turn=None), _PROMOTE
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
    running = DrainPlan(step=step, activities=state.activities, awaiting="turn", turn=turn)
    if report.compact:
        return _compacting(running, turn), Compact(reason="manual")
    return running, turn


def _compacting(state: DrainPlan, turn: RequestTurn) -> DrainPlan:
    return msgspec.structs.replace(state, awaiting="compaction", turn=turn, overflow=False)


def _after_compaction(state: DrainPlan, report: Compacted) -> tuple[DrainPlan, DrainEffect]:
    """A compaction ended: request the turn it came before (rebuilt from the checkpoint),
    or open the drain's first activity; after an overflow whose compaction did not
    complete, the turn's failure stands and the activity ends."""
    if state.awaiting != "compaction":
        raise ValueError(f"a compaction's end reported while awaiting {state.awaiting}")
    turn = state.turn
    if turn is None:
        return msgspec.structs.replace(state, awaiting="promotion"), _OPEN
    if state.overflow and not report.completed:
        ended = msgspec.structs.replace(state, overflow=False)
        return _end_activity(ended, queued_pending=state.queued_pending)
    resumed = msgspec.structs.replace(state, awaiting="turn", overflow=False, queued_pending=False)
    return resumed, turn


def _end_activity(state: DrainPlan, *, queued_pending: bool) -> tuple[DrainPlan, DrainEffect]:
    """The activity ran its last turn: open the next queued prompt as its own
    activity, else end the drain."""
    if queued_pending:
        return DrainPlan(activities=state.activities + 1), _OPEN
    return msgspec.structs.replace(state, awaiting="done", turn=None), _IDLE
