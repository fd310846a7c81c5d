"""The drain planner (runtime.drain): each decision, and properties over whole drains.

The property tests run the planner against a model inbox: rows admitted at random
between effects, promotion by the inbox's rule (the pending steers, oldest first; when
an activity opens with no steer pending, the oldest queued prompt), turns that ran
local tools or failed at random. They check what the drain promises whatever the
interleaving: no input promoted twice, FIFO, a queued prompt opens its own activity,
a batch of steers resets the provider-turn allowance once, the turn cap holds, and a
drain that goes idle leaves no queued prompt behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import runtime.drain as drain
from runtime.drain import (
    Blocked,
    DrainEffect,
    DrainInput,
    DrainPlan,
    Fail,
    Idle,
    Open,
    Promote,
    Promoted,
    RequestTurn,
    StepLimitExceeded,
    TurnEnded,
    begin_drain,
    plan,
)

Delivery = Literal["steer", "queue"]


def test_exports_are_sorted_and_public() -> None:
    assert drain.__all__ == sorted(drain.__all__)
    assert all(hasattr(drain, name) for name in drain.__all__)


# -- each decision -------------------------------------------------------------------------


def _at_turn(step: int, *, force: bool = False) -> DrainPlan:
    """A plan awaiting the end of provider turn *step*."""
    state, effect = begin_drain(force=force)
    state, effect = plan(state, Promoted(count=1, max_turns=100))
    for _ in range(step - 1):
        state, effect = plan(state, TurnEnded(local_tools=1))
        state, effect = plan(state, Promoted(count=0, max_turns=100))
    assert effect == RequestTurn(step=step, max_turns=100)
    return state


def test_a_drain_begins_by_opening_an_activity() -> None:
    state, effect = begin_drain(force=False)
    assert effect == Open()
    assert (state.step, state.activities, state.awaiting, state.force) == (0, 1, "promotion", False)
    assert begin_drain(force=True)[0].force


def test_an_opening_that_promotes_nothing_ends_the_drain() -> None:
    state, effect = plan(begin_drain(force=False)[0], Promoted(count=0, max_turns=5))
    assert effect == Idle()
    assert state.awaiting == "done"


def test_an_explicit_resume_runs_a_turn_with_nothing_promoted() -> None:
    state, effect = plan(begin_drain(force=True)[0], Promoted(count=0, max_turns=5))
    assert effect == RequestTurn(step=1, max_turns=5)
    assert not state.force  # only the first turn is forced


def test_a_promotion_requests_the_first_turn_of_the_allowance() -> None:
    state, effect = plan(begin_drain(force=False)[0], Promoted(count=3, max_turns=5))
    assert effect == RequestTurn(step=1, max_turns=5)
    assert not effect.final
    assert RequestTurn(step=5, max_turns=5).final


def test_a_turn_that_ran_tools_continues_at_a_promotion_boundary() -> None:
    state, effect = plan(_at_turn(1), TurnEnded(local_tools=2))
    assert effect == Promote()
    state, effect = plan(state, Promoted(count=0, max_turns=100))
    assert effect == RequestTurn(step=2, max_turns=100)


def test_steers_pending_after_a_turn_continue_the_activity() -> None:
    state, effect = plan(_at_turn(1), TurnEnded(steers_pending=True, queued_pending=True))
    assert effect == Promote()  # steers first; the queued prompt waits for its own activity


def test_steers_promoted_at_a_boundary_reset_the_allowance() -> None:
    state, effect = plan(_at_turn(4), TurnEnded(steers_pending=True))
    state, effect = plan(state, Promoted(count=2, max_turns=100))
    assert effect == RequestTurn(step=1, max_turns=100)


def test_a_turn_with_nothing_to_continue_ends_the_drain() -> None:
    state, effect = plan(_at_turn(2), TurnEnded())
    assert effect == Idle()
    assert state.awaiting == "done"


def test_a_queued_prompt_pending_at_the_end_opens_the_next_activity() -> None:
    state, effect = plan(_at_turn(3, force=True), TurnEnded(queued_pending=True))
    assert effect == Open()
    assert state == DrainPlan(activities=2)  # allowance fresh, nothing forced


def test_a_failed_turn_ends_its_activity_even_with_tools_or_steers() -> None:
    failed = TurnEnded(failed=True, local_tools=1, steers_pending=True)
    assert plan(_at_turn(1), failed)[1] == Idle()
    queued = TurnEnded(failed=True, local_tools=1, steers_pending=True, queued_pending=True)
    assert plan(_at_turn(1), queued)[1] == Open()


def test_work_past_the_allowance_fails_the_drain() -> None:
    state, effect = plan(begin_drain(force=False)[0], Promoted(count=1, max_turns=2))
    state, effect = plan(state, TurnEnded(local_tools=1))
    state, effect = plan(state, Promoted(count=0, max_turns=2))
    assert effect == RequestTurn(step=2, max_turns=2)
    state, effect = plan(state, TurnEnded(local_tools=1))
    state, effect = plan(state, Promoted(count=0, max_turns=2))
    assert effect == Fail(reason=StepLimitExceeded(max_turns=2))
    assert effect.reason.message == "Work remained after 2 provider turns"
    assert state.awaiting == "done"


def test_a_promotion_at_the_cap_grants_a_fresh_allowance() -> None:
    state, effect = plan(begin_drain(force=False)[0], Promoted(count=1, max_turns=1))
    state, effect = plan(state, TurnEnded(steers_pending=True))
    state, effect = plan(state, Promoted(count=1, max_turns=1))
    assert effect == RequestTurn(step=1, max_turns=1)


def test_a_lowered_allowance_applies_from_the_next_boundary() -> None:
    state = _at_turn(3)
    state, effect = plan(state, TurnEnded(local_tools=1))
    state, effect = plan(state, Promoted(count=0, max_turns=3))
    assert effect == Fail(reason=StepLimitExceeded(max_turns=3))


def test_blocked_context_ends_the_drain() -> None:
    state, effect = plan(begin_drain(force=True)[0], Blocked())
    assert effect == Idle()
    assert state.awaiting == "done"


@pytest.mark.parametrize(
    ("state", "report"),
    [
        (begin_drain(force=False)[0], TurnEnded()),
        (_at_turn(1), Promoted(count=1, max_turns=3)),
        (_at_turn(1), Blocked()),
        (plan(begin_drain(force=False)[0], Blocked())[0], Promoted(count=1, max_turns=3)),
        (plan(_at_turn(1), TurnEnded())[0], TurnEnded()),
    ],
)
def test_a_report_that_does_not_answer_the_last_effect_is_refused(
    state: DrainPlan, report: DrainInput
) -> None:
    with pytest.raises(ValueError, match="awaiting"):
        plan(state, report)


# -- whole drains against a model inbox ----------------------------------------------------


@dataclass
class Row:
    seq: int
    delivery: Delivery


@dataclass
class World:
    """A model inbox and what the drain did to it."""

    pending: list[Row] = field(default_factory=list)
    admitted: list[Row] = field(default_factory=list)
    promoted: list[tuple[int, str, Row]] = field(default_factory=list)
    """(activity, effect type, row) per promoted row, in promotion order."""
    effects: list[DrainEffect] = field(default_factory=list)
    reports: list[DrainInput] = field(default_factory=list)

    def admit(self, delivery: Delivery) -> None:
        row = Row(seq=len(self.admitted) + 1, delivery=delivery)
        self.admitted.append(row)
        self.pending.append(row)

    def promote(self, *, opening: bool) -> list[Row]:
        """The inbox's rule: the pending steers, oldest first; opening with no steer
        pending, the oldest queued prompt."""
        steers = [row for row in self.pending if row.delivery == "steer"]
        queued = [row for row in self.pending if row.delivery == "queue"]
        chosen = steers or (queued[:1] if opening else [])
        self.pending = [row for row in self.pending if row not in chosen]
        return chosen


_DELIVERY = st.sampled_from(["steer", "queue"])
_MAX_EFFECTS = 400


def _run(data: st.DataObject, *, force: bool, max_turns: int) -> World:
    """Drive one drain to its end, admitting rows at random between effects."""
    world = World()
    for delivery in data.draw(st.lists(_DELIVERY, max_size=5), label="inbox"):
        world.admit(delivery)
    budget = data.draw(st.integers(0, 6), label="later admissions")
    state, effect = begin_drain(force=force)
    for _ in range(_MAX_EFFECTS):
        world.effects.append(effect)
        if isinstance(effect, Fail | Idle):
            return world
        while budget and data.draw(st.booleans(), label="admit now"):
            world.admit(data.draw(_DELIVERY))
            budget -= 1
        report: DrainInput
        if isinstance(effect, Open | Promote):
            if isinstance(effect, Open) and data.draw(st.integers(0, 9)) == 0:
                report = Blocked()
            else:
                rows = world.promote(opening=isinstance(effect, Open))
                kind = type(effect).__name__
                world.promoted.extend((state.activities, kind, row) for row in rows)
                report = Promoted(count=len(rows), max_turns=max_turns)
        else:
            report = TurnEnded(
                failed=data.draw(st.integers(0, 7)) == 0,
                local_tools=data.draw(st.integers(0, 2)),
                steers_pending=any(row.delivery == "steer" for row in world.pending),
                queued_pending=any(row.delivery == "queue" for row in world.pending),
            )
        world.reports.append(report)
        state, effect = plan(state, report)
    raise AssertionError(f"the drain did not end within {_MAX_EFFECTS} effects")


def _drains() -> st.SearchStrategy[tuple[st.DataObject, bool, int]]:
    return st.tuples(st.data(), st.booleans(), st.integers(1, 4))


@settings(max_examples=400, deadline=None)
@given(_drains())
def test_no_input_is_promoted_twice(case: tuple[st.DataObject, bool, int]) -> None:
    data, force, max_turns = case
    world = _run(data, force=force, max_turns=max_turns)
    seqs = [row.seq for _, _, row in world.promoted]
    assert len(seqs) == len(set(seqs))
    assert set(seqs) | {row.seq for row in world.pending} == {r.seq for r in world.admitted}


@settings(max_examples=400, deadline=None)
@given(_drains())
def test_promotion_is_fifo(case: tuple[st.DataObject, bool, int]) -> None:
    data, force, max_turns = case
    world = _run(data, force=force, max_turns=max_turns)
    for delivery in ("steer", "queue"):
        seqs = [row.seq for _, _, row in world.promoted if row.delivery == delivery]
        assert seqs == sorted(seqs)
        # nothing of this delivery is skipped: what is still pending came after
        pending = [row.seq for row in world.pending if row.delivery == delivery]
        assert not seqs or not pending or max(seqs) < min(pending)


@settings(max_examples=400, deadline=None)
@given(_drains())
def test_a_queued_prompt_opens_its_own_activity(case: tuple[st.DataObject, bool, int]) -> None:
    data, force, max_turns = case
    world = _run(data, force=force, max_turns=max_turns)
    per_activity: dict[int, int] = {}
    for activity, kind, row in world.promoted:
        if row.delivery == "queue":
            assert kind == "Open"  # never taken at a boundary between turns
            per_activity[activity] = per_activity.get(activity, 0) + 1
    assert all(count == 1 for count in per_activity.values())
    # an activity opened for a queued prompt takes it alone
    for activity in per_activity:
        assert [row for a, _, row in world.promoted if a == activity][0].delivery == "queue"
    # a later activity opens only after the previous one ran a turn and ended
    opens = [i for i, effect in enumerate(world.effects) if isinstance(effect, Open)]
    for index in opens[1:]:
        ended = world.reports[index - 1]
        assert isinstance(ended, TurnEnded) and ended.queued_pending


@settings(max_examples=400, deadline=None)
@given(_drains())
def test_the_turn_cap_holds_and_steers_reset_it_once(
    case: tuple[st.DataObject, bool, int],
) -> None:
    data, force, max_turns = case
    world = _run(data, force=force, max_turns=max_turns)
    since_promotion = 0
    for index, effect in enumerate(world.effects):
        if isinstance(effect, RequestTurn):
            promotion = world.reports[index - 1]
            assert isinstance(promotion, Promoted)
            # a batch of any size resets the allowance once: back to step 1
            since_promotion = 1 if promotion.count else since_promotion + 1
            assert effect.step == since_promotion
            assert 1 <= effect.step <= max_turns
        elif isinstance(effect, Open):
            since_promotion = 0
        elif isinstance(effect, Fail):
            # only work past the allowance fails a drain
            assert effect.reason == StepLimitExceeded(max_turns=max_turns)
            assert since_promotion == max_turns
            promotion, ended = world.reports[index - 1], world.reports[index - 2]
            assert promotion == Promoted(count=0, max_turns=max_turns)
            assert isinstance(ended, TurnEnded) and not ended.failed
            assert ended.local_tools or ended.steers_pending


@settings(max_examples=400, deadline=None)
@given(_drains())
def test_an_idle_drain_leaves_no_queued_prompt(case: tuple[st.DataObject, bool, int]) -> None:
    data, force, max_turns = case
    world = _run(data, force=force, max_turns=max_turns)
    if not isinstance(world.effects[-1], Idle) or isinstance(world.reports[-1], Blocked):
        return
    last = world.reports[-1]
    if isinstance(last, Promoted):  # an opening found nothing at all
        assert last.count == 0 and not world.pending
    else:
        assert isinstance(last, TurnEnded) and not last.queued_pending
    # an explicit resume runs at least one turn unless the context is unavailable
    if force and not isinstance(world.reports[0], Blocked):
        assert any(isinstance(effect, RequestTurn) for effect in world.effects)
