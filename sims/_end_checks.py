"""The checks at the end of a seed, once every session has settled: each live session's
stored events, projected history, inbox, tool calls and Context Epoch against what the
step checker and the world saw during the run."""

from __future__ import annotations

from typing import Any, Final

from sims._invariants import Checker, check_late_answers, fold, same_history
from sims._world import World
from storage import Epoch, Events, History, PendingInputs

__all__ = ["check_the_store"]

_MAX_EVENTS: Final = 1_000_000


async def check_the_store(
    storage: Any, c: Checker, w: World, sessions: list[tuple[str, dict[str, int]]]
) -> None:
    """Check *sessions* (each with the admissions its client was acknowledged, message id
    to seq) in *storage*; violations go to *c*. Raises what a read of the store raises."""
    for key, count in sorted(w.executions.items()):
        c.checks["tools.executed_once"] += 1
        if count > 1:
            c.fail("tools.executed_once", f"{key[0]} {key[1]} executed {count} times")
    # A store that lost its tail (a crash, dropped pages) may have lost the epoch too:
    # each opening of the store is checked on its own, and the last one against the
    # stored epoch.
    baselines: dict[str, dict[tuple[int, int, int], set[str]]] = {}
    latest: dict[str, tuple[int, int, int]] = {}
    for sid, baseline, store in w.requests:
        baselines.setdefault(sid, {}).setdefault(store, set()).add(baseline)
        latest[sid] = store
    for sid, acked in sessions:
        events = await storage.read(Events(session_id=sid, after=-1, limit=_MAX_EVENTS))
        c.checks["events.contiguous_seqs"] += 1
        if [e.seq for e in events] != list(range(len(events))):
            c.fail("events.contiguous_seqs", f"{sid} stored seqs are not 0..{len(events) - 1}")
        c.checks["events.fold_equals_projection"] += 1
        folded = fold(events)
        difference = same_history(folded, await storage.read(History(session_id=sid)))
        if difference is not None:
            c.fail("events.fold_equals_projection", f"{sid} {difference}")
        _check_inbox(c, sid, acked, folded, await storage.read(PendingInputs(session_id=sid)))
        _check_tools(c, w, sid)
        check_late_answers(c, sid)
        epoch = await storage.read(Epoch(session_id=sid))
        stores = baselines.get(sid, {})
        c.checks["context.epoch_baseline_stable"] += 1
        for _, seen in sorted(stores.items()):
            if len(seen) > 1:
                c.fail("context.epoch_baseline_stable", f"{sid} {len(seen)} baselines in one epoch")
        last = stores[latest[sid]] if stores else set()
        state = c.sessions.get(sid)
        renewed = state is not None and state.compactions > 0  # maybe after the last request
        if epoch is not None and last and not renewed and last != {epoch.baseline}:
            c.fail("context.epoch_baseline_stable", f"{sid} requests differ from the stored epoch")


def _check_inbox(
    c: Checker, sid: str, acked: dict[str, int], folded: Any, pending: list[Any]
) -> None:
    admitted = {row.id: row for row in folded.inputs.values()}
    c.checks["admission.acknowledged_durable"] += len(acked)
    for mid, seq in acked.items():
        row = admitted.get(mid)
        if row is None or row.admitted_seq != seq:
            c.fail("admission.acknowledged_durable", f"{sid} acked {mid} not durable")
    c.checks["admission.promoted_once"] += len(admitted)
    waiting = sorted(r.id for r in admitted.values() if not isinstance(r.promoted_seq, int))
    visible = sorted(r.id for r in pending)
    if waiting != visible:
        c.fail("admission.promoted_once", f"{sid} unpromoted {waiting} but pending {visible}")


def _check_tools(c: Checker, w: World, sid: str) -> None:
    s = c.sessions.get(sid)
    if s is None:
        return
    for call in s.called:
        c.checks["tools.cut_recorded_interrupted"] += 1
        settled = s.settled.get(call)
        if settled is None:
            c.fail("tools.cut_recorded_interrupted", f"{sid} {call} never settled")
        elif (sid, call) in w.cut_at_crash and settled != "failed":
            c.fail("tools.cut_recorded_interrupted", f"{sid} {call} cut by a crash: {settled}")
