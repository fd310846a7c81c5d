"""The SessionActor: one active session's drain loop, driven by its Lane.

Its mailbox carries wakes, runs and interrupts. Two operations reach it by a plain
call on the trio thread instead, each by that one path: an admission hands it the
activity it opened (:meth:`SessionActor.hand_opened`), and an idle wait registers
with it against its mailbox's sequence numbers (:meth:`SessionActor.idle_waiter`).
Drains run as a child task with their own cancel scope so interrupts are served
while a drain is in flight. The actor holds nothing durable: a restart rebuilds
from storage.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Final

import trio
from msgspec.structs import replace
from opentelemetry.trace import SpanContext

from actors.cluster import SessionLease
from actors.kernel import Actor, ActorStatistics, Reply, open_mailbox
from actors.session._compaction import RequestBudget, attempt_for, compact, prune
from actors.session._config import session_model
from actors.session._context import EpochKeeper
from actors.session._idle import IdleWaits
from actors.session._ports import SessionLocation, SessionPorts
from actors.session._recovery import (
    StepLimitExceededError,
    record_drain_failure,
    recover_until_written,
    run_failure,
)
from actors.session._session_messages import CompactSoon, Interrupt, Message, Opened, Run, Wake
from actors.session._stopping import continuation
from actors.session._titles import first_prompt, title_soon
from actors.session._turn import (
    Turn,
    TurnOutcome,
    failure_tag,
    run_turn,
    turn_attributes,
    turn_report,
)
from runtime import events as ev
from runtime import llm
from runtime.agents import AgentInfo, system_prompt
from runtime.compaction import plan_checkpoint
from runtime.drain import (
    WAKE_ANY,
    Blocked,
    Compact,
    Compacted,
    DrainInput,
    DrainMode,
    Fail,
    Idle,
    Lane,
    Open,
    OverBudget,
    Promote,
    Promoted,
    RequestTurn,
    begin_drain,
    plan,
)
from runtime.history import HistoryView, to_llm_model, visible_history
from runtime.revert import hidden_ranges
from runtime.telemetry import current_span_context, span
from storage import AppendWithPending, GetSession, HistoryChanges, LeaseLost, PromoteInputs

__all__ = ["DEFAULT_MAX_TURNS", "SessionActor", "StepLimitExceededError"]

_log = logging.getLogger("kittiwake.session")
DEFAULT_MAX_TURNS: Final = 25
MAILBOX_BOUND: Final = 64
_MAX_LINKS: Final = 16


class SessionActor(Actor[Message]):
    """Drains one session's durable inbox through provider turns."""

    kind = "session"

    def __init__(self, session_id: str, ports: SessionPorts) -> None:
        super().__init__(session_id, mailbox=open_mailbox(MAILBOX_BOUND), label=session_id)
        self.session_id = session_id
        self._p = ports
        self.lane = Lane()
        self._scope: trio.CancelScope | None = None
        self._drain_done = trio.Event()
        self._idle_waits = IdleWaits()
        self._run_waiters: list[Reply[None]] = []
        self.last_active = trio.current_time()
        self.last_error: str | None = None
        self.retired = False
        """Stopped for its session's deletion (``SessionExecution.retiring``)."""
        self.provider_turns = 0
        self._recovered = False
        self._has_epoch = False
        self._history = HistoryView()
        self._epochs = EpochKeeper(session_id, ports.storage, ports.ids, ports.now_ms)
        self._openings = 0
        self._opened: Opened | None = None
        self._nursery: trio.Nursery | None = None
        self._title_checked = False
        """Whether this activation looked at whether the session needs a title."""
        self._title_prompt: str | None = None
        """The first prompt's text, while a title is to be written beside the next turn."""
        self._turn: Turn | None = None
        """The drain's latest provider turn (``None`` before its first)."""
        self._turn_open = False
        """Whether that turn's step is still open (it raised before ending it)."""
        self._admissions: list[SpanContext] = []
        """Admissions (their spans) the next drain's trace links to."""
        self._compact_asked = False
        """A manual compaction waits for the next safe boundary."""
        self._budget = RequestBudget()
        self._lease = (
            SessionLease(ports.storage, session_id, ports.cluster) if ports.cluster else None
        )
        """Cluster mode: the session's lease, held while a drain chain runs here and parked
        for a while after."""
        self._releasing = False

    @property
    def driving(self) -> bool:
        """Whether this actor holds its session's lease (cluster mode; False otherwise)."""
        return self._lease is not None and self._lease.held

    def statistics(self) -> ActorStatistics:
        """The actor's snapshot, with ``last_error``: the last failed drain's reason."""
        return replace(super().statistics(), last_error=self.last_error)

    @property
    def idle(self) -> bool:
        return (
            self.lane.idle and not self._releasing and self._openings == 0 and self._opened is None
        )

    def reserve_opening(self) -> tuple[int, int] | None:
        """Let an admission open the next activity in its own batch, if the actor is idle
        and ready (recovered, epoch initialized) and, in cluster mode, holds its lease
        parked (``SessionLease.reserve``); return the history version to read from, or None.
        Until :meth:`release_opening` or :meth:`hand_opened` the actor does not count as
        idle, so it is not passivated meanwhile."""
        if not (self.lane.idle and self._recovered and self._has_epoch) or self._openings:
            return None
        if self._opened is not None or self.state != "running":
            return None
        if self._lease is not None and not self._lease.reserve():
            return None  # cluster mode: only under the lease parked here
        self._openings += 1
        return self._history.generation, self._history.version

    def note_admission(self) -> None:
        """Link the next drain's trace to the current span (an admission), if recorded."""
        context = current_span_context()
        if context is not None and len(self._admissions) < _MAX_LINKS:
            self._admissions.append(context)

    def settled_since(self, moment: float) -> bool:
        """Cluster mode: whether the actor is idle with its lease parked by a write sent
        after *moment* (trio's clock), which found nothing pending and nobody else driving:
        no other worker's state needs reading to know the session is settled."""
        return self.idle and self._lease is not None and self._lease.parked_since(moment)

    @property
    def lease(self) -> SessionLease | None:
        """Cluster mode: the session's lease (an opening reserves under it); None in one
        process."""
        return self._lease

    def release_opening(self, *, in_doubt: bool = False) -> None:
        """The reserved opening will not come: its admission failed, or (*in_doubt*) it
        was not answered in time and its batch may still commit. In doubt, a drain starts
        that first recovers the session from the store, as after a restart; the store
        answers that read after the batch, so a promotion the actor was not handed is
        found (the session then needs a resume), never left unseen."""
        self._openings -= 1
        if in_doubt and self.state == "running":
            self._recovered = False
            self._wake(WAKE_ANY)

    def hand_opened(self, opened: Opened) -> None:
        """Hand the actor the activity an admission opened under :meth:`reserve_opening`:
        the one way it arrives (no message, no checkpoint). Call it once the admitting
        batch committed; it cannot fail.

        The actor keeps it for its drain's opening step and wakes its lane at the
        admission's seq: a drain starts, or the follow-up of a running one takes it.
        Messages still queued change no outcome: a wake or run adds a follow-up, an
        interrupt whose barrier covers the admission cancels the drain this starts. A
        restarting actor's recovery wake starts the drain that takes it; a stopped one
        (session deleted, runtime closing) ignores it: the admission is durable anyway.
        """
        self._openings -= 1
        if self.state in ("stopped", "dead"):
            return
        self.note_admission()
        self._opened = opened
        self._wake(opened.seq)

    def _wake(self, seq: int) -> None:
        if self.lane.wake(seq) == "start" and self._nursery is not None:
            self._start(self._nursery, "wake")

    def idle_waiter(self, after: int) -> Reply[None] | None:
        """Register an idle wait: a reply answered once the actor has handled the
        messages of its mailbox up to sequence number *after* (``mailbox.sent`` read
        when the wait began: everything sent before it, so a prompt's wake queued
        before the wait is waited for) and its lane is idle (no drain running or
        pending). None when that holds already.

        The one way to wait for idleness; it wakes no task of the actor. Wait on the
        reply ``with held(actor, reply)``, so that it is failed if the actor crashes or
        stops; a wait the caller abandons is dropped when the actor next answers.
        """
        return None if self._idle_through(after) else self._idle_waits.add(after)

    def _idle_through(self, after: int) -> bool:
        """Whether the actor handled its mailbox's messages up to *after* and is idle."""
        return self.lane.idle and not self._releasing and self.mailbox.received >= after

    async def run(self) -> None:
        self.lane = Lane()
        self._releasing = False
        self._recovered = False
        self._has_epoch = False
        self._history = HistoryView()
        async with trio.open_nursery() as nursery:
            self.mark_running()
            if self.statistics().restarts:
                # A restart lost the lane and any wake it held; the inbox is the record.
                self._handle(Wake(WAKE_ANY), nursery)
            self._nursery = nursery
            try:
                while True:
                    message = await self.mailbox.receive()
                    # No checkpoint from here to the next receive: to any other task,
                    # every message received has been handled.
                    self._handle(message, nursery)
                    if self._idle_waits:
                        self._idle_waits.answer(self._idle_through)
            finally:
                self._nursery = None

    def _handle(self, message: Message, nursery: trio.Nursery) -> None:
        match message:
            case Wake(seq=seq):
                if self.lane.wake(seq) == "start":
                    self._start(nursery, "wake")
            case Run(reply=reply):
                self._run_waiters.append(reply)
                if self.lane.run() == "start":
                    self._start(nursery, "run")
            case Interrupt(seq=seq, reply=reply):
                if self.lane.interrupt(seq) == "cancel" and self._scope is not None:
                    self._scope.cancel()
                    nursery.start_soon(self._answer_when_done, reply, self._drain_done)
                else:
                    reply.send(None)
            case CompactSoon(reply=reply):
                self._compact_asked = True
                if self.lane.wake(max(self.lane.barrier + 1, 0)) == "start":
                    self._start(nursery, "wake")
                reply.send(None)

    async def _answer_when_done(self, reply: Reply[None], done: trio.Event) -> None:
        await done.wait()
        reply.send(None)

    def _start(self, nursery: trio.Nursery, mode: DrainMode) -> None:
        nursery.start_soon(self._drain_chain, mode)

    async def _drain_chain(self, mode: DrainMode | None) -> None:
        """Run drains back to back while the lane has a follow-up, then report idle. In
        cluster mode only under the session's lease: without it (another worker drives)
        the lane's work is left to that worker; the lease is released at the end."""
        rewoken = False
        while mode is not None:
            if self._lease is not None:
                if not await self._lease.acquire():
                    self.lane.stand_down()
                    break
                self._adopt_lease(self._lease)
            self._scope = scope = trio.CancelScope()
            self._drain_done = done = trio.Event()
            waiters, self._run_waiters = (self._run_waiters, []) if mode == "run" else ([], [])
            links, self._admissions = self._admissions, []
            attributes = {"session.id": self.session_id, "kittiwake.drain.mode": mode}
            try:
                with scope, span("drain", attributes, root=True, links=links):
                    async with self._lease.driving(scope) if self._lease else nullcontext():
                        try:
                            await self._drain(force=mode == "run")
                        except Exception as exc:  # noqa: BLE001 - reported, the actor lives
                            await self._drain_failed(exc)
            finally:
                self._scope = None
                self.set_activity("")
                self.last_active = trio.current_time()
                done.set()
                for reply in waiters:
                    reply.send(None)
            if self._lease is not None and self._lease.lost:  # taken over: interrupted
                self._recovered = False
                self.lane.stand_down()
                break
            mode = self.lane.finished()
            if mode is None and self._lease is not None:
                self._releasing = True  # not idle until parked: a wait sees it free
                # Input admitted elsewhere between the drain's last look and the park
                # keeps the lease driving: it is this worker's to drive (once: input that
                # cannot be promoted waits, the lease released, for the next wake).
                if await self._lease.park(keep_for_pending=not rewoken):
                    rewoken, mode = True, "wake" if self.lane.wake(WAKE_ANY) == "start" else None
                self._releasing = False
        self._idle_waits.answer(self._idle_through)
        self.last_active = trio.current_time()
        self._p.on_idle(self.session_id)

    async def _drain_failed(self, exc: Exception) -> None:
        """Report a failed drain durably (under the lease, in cluster mode), unless the
        store refused its writes because another worker took the lease over."""
        lease = self._lease
        if lease is not None and (lease.fenced_off(exc) or not await lease.drive_again()):
            _log.warning("lease taken over; writes refused", extra={"session": self.session_id})
            return
        self.last_error = f"{type(exc).__name__}: {exc}"
        _log.error("drain failed", extra={"session": self.session_id}, exc_info=exc)
        turn, turn_open = self._turn, self._turn_open
        self._turn, self._turn_open, self._recovered = None, False, False
        self._recovered = await record_drain_failure(
            self._p, self.session_id, exc, turn, turn_open=turn_open, agent=self._agent
        )

    def _adopt_lease(self, lease: SessionLease) -> None:
        """After another worker drove the session, forget what this actor remembers of it
        (read again); after a takeover of a dead holder's lease, recover the session as a
        restart does."""
        if lease.fresh:
            self._history, self._has_epoch, self._epochs.row = HistoryView(), False, None
        if lease.taken_over:
            self._recovered = False

    async def _read_info(self) -> None:
        """Cluster mode: learn the session's info again before a drain. Another worker may
        have changed it (switched its agent or model, committed a revert) while the lease
        was parked here; what this process remembered is from its own writes only.

        A drain an admission opened here starts from the info that admission's batch
        read under the session's lock (``Opened.info``), with no read of its own. Any
        other drain (woken by a sweep or another worker's admission, after an
        acquisition or a takeover, a follow-up in the chain) reads the session: the read
        checks its version, so an unchanged session costs no row read."""
        opened = self._opened
        if opened is not None and opened.info is not None:
            self._opened = replace(opened, info=None)  # once: a later drain reads
            self._p.refresh_info(opened.info)
            return
        info = await self._p.storage.read(GetSession(session_id=self.session_id))
        if info is not None:
            self._p.refresh_info(info)

    # -- the drain ----------------------------------------------------------------------

    async def _drain(self, *, force: bool) -> None:
        """Perform the drain planner's effects until it reports the drain idle
        (``runtime.drain``). Raises StepLimitExceededError when it fails the drain."""
        self._turn, self._turn_open = None, False
        if self._lease is not None:
            await self._read_info()
        if not self._recovered:
            self.set_activity("recovering")
            await recover_until_written(self._p.storage, self.session_id, self._p.now_ms)
            self._recovered = True
        state, effect = begin_drain(force=force, compact=self._take_compact_request())
        continued = 0  # times session_stopping kept this drain going
        while True:
            report: DrainInput
            if self._lease and not isinstance(effect, Idle) and not await self._lease.drive_again():
                raise LeaseLost(f"the lease of {self.session_id} was acquired elsewhere")
            match effect:
                case RequestTurn(step=step, max_turns=max_turns, compacted=compacted):
                    outcome = await self._provider_turn(step, max_turns, compacted=compacted)
                    if isinstance(outcome, OverBudget):
                        report = outcome
                    else:
                        report = turn_report(outcome, auto=self._budget.auto)
                case Compact(reason=reason, overflow=overflow):
                    report = await self._compact(reason, overflow=overflow)
                case Open() | Promote():
                    report = await self._promote_step(opening=isinstance(effect, Open))
                case Fail(reason=reason):
                    raise StepLimitExceededError(reason.message)
                case Idle():
                    more = await continuation(self._p, self._location(), self.session_id,
                                              report, continued)  # fmt: skip
                    if more is None:
                        return
                    await self._append([more])  # the next turn answers it
                    continued, (state, effect) = continued + 1, begin_drain(force=True)
                    continue
            state, effect = plan(state, report)

    def _take_compact_request(self) -> bool:
        asked, self._compact_asked = self._compact_asked, False
        return asked

    async def _promote_step(self, *, opening: bool) -> Promoted | Blocked:
        """At a safe boundary: apply configuration edits, make sure the Context Epoch
        exists, then promote (see :meth:`_promote`); report what the planner needs."""
        directory = self._p.session_info(self.session_id).location.directory
        await self._p.ready_location(directory)  # edits apply (plugins load) from this turn on
        if not await self._ensure_epoch():
            return Blocked()
        promoted, _ = await self._promote(opening=opening)
        if promoted and not self._title_checked:
            self._title_checked = True
            self._title_prompt = first_prompt(
                self._p.title_model, self._p.session_info(self.session_id), self._history.rows,
                promoted,
            )  # fmt: skip
        max_turns = self._agent().steps or self._p.max_turns
        return Promoted(
            count=len(promoted), max_turns=max_turns, compact=self._take_compact_request()
        )

    async def _ensure_epoch(self) -> bool:
        """Initialize the Context Epoch before any promotion; False when blocked."""
        if self._has_epoch:
            return True
        location = self._location()
        self.set_activity("initializing context")
        epoch = await self._epochs.initialize(location.observe_context, self._agent().name)
        if epoch is None:
            self.last_error = "Initial context is unavailable; the prompt stays pending"
            return False
        self._has_epoch = True
        return True

    def _location(self) -> SessionLocation:
        return self._p.location_for(self._p.session_info(self.session_id).location.directory)

    async def _promote(
        self, *, opening: bool
    ) -> tuple[list[ev.InputAdmitted], list[ev.InputAdmitted]]:
        """Promote pending steers; when *opening* an activity with no steer pending, the
        oldest queued prompt instead. Returns (promoted rows, rows still pending)."""
        sid, now = self.session_id, self._p.now_ms()
        self.set_activity("promoting")
        opened, self._opened = self._opened, None
        if opened is not None:
            return await self._take_opened(opened)

        view = self._history
        # Not waiting for the fdatasync: it runs while the request is assembled, and the
        # turn's own durable write comes after it. Lost only to a power cut before that,
        # a promotion leaves its prompt pending, to be promoted again at restart. The
        # history changes come with the answer instead of a read queued behind the sync.
        rows, delta = await self._p.storage.write(
            PromoteInputs(session_id=sid, opening=opening, timestamp=now),
            durable=False,
            then=HistoryChanges(session_id=sid, generation=view.generation, version=view.version),
        )
        view.apply(delta)
        return rows

    async def _take_opened(
        self, opened: Opened
    ) -> tuple[list[ev.InputAdmitted], list[ev.InputAdmitted]]:
        """Use a promotion the admitting batch already made (the drain's opening step)."""
        view = self._history
        if opened.base == (view.generation, view.version):
            view.apply(opened.delta)
        else:  # the view moved on meanwhile: read what changed instead
            await self._refresh_history()
        return opened.promoted, opened.pending

    async def _refresh_history(self) -> None:
        """Fold in what changed in the stored history since the view last looked."""
        view, sid = self._history, self.session_id
        query = HistoryChanges(session_id=sid, generation=view.generation, version=view.version)
        view.apply(await self._p.storage.read(query))

    def _agent(self) -> AgentInfo:
        info = self._p.session_info(self.session_id)
        name = info.agent if isinstance(info.agent, str) else None
        return self._location().agent(name)

    async def _provider_turn(
        self, step: int, max_turns: int, *, compacted: bool = False
    ) -> TurnOutcome | OverBudget:
        """Build the turn's request and run it; OverBudget instead, when *compacted* is
        False, automatic compaction is on and the request is over the model's budget with
        older complete turns to compact. After a completed compaction the Context Epoch
        starts again from a freshly rendered baseline."""
        sid = self.session_id
        info = self._p.session_info(sid)
        self._history.hide(hidden_ranges(info))  # messages a revert hides or dropped
        location = await self._p.location(info.location.directory)  # open before _agent()
        agent = self._agent()
        model = session_model(info, agent, location.settings, self._p.default_model)
        settings = location.settings.compaction()
        self.set_activity("reconciling context")
        known, checkpoint = self._epochs.row, self._history.checkpoint
        context = await location.observe_context()
        epoch = await self._epochs.at_turn(context, checkpoint[0] if checkpoint else None)
        if epoch is not known:  # context was admitted (or re-read): history may have moved
            await self._refresh_history()
        if settings.prune:
            visible = visible_history(self._history.rows, epoch.baseline_seq)
            if await prune(self._p.storage, sid, visible, settings, self._p.now_ms):
                await self._refresh_history()
        final = step >= max_turns
        tools = [] if final else location.tools_for(agent, info.mcp_tools, sid)
        request = llm.LLMRequest(
            model=to_llm_model(model),
            system=[*system_prompt(agent, model.provider_id, model.id), epoch.baseline],
            messages=self._history.lowered(model, epoch.baseline_seq), tools=tools,
            tool_choice="none" if final else "auto", prompt_cache_key=sid,
        )  # fmt: skip
        request = await location.plugins.transform_request(request, sid, agent.name)
        client = self._p.client_for(location)
        prefix = (model, epoch.baseline_seq, checkpoint[0] if checkpoint else None)
        self._budget.measure(request, prefix, auto=settings.auto)
        if not compacted and settings.auto and self._budget.over(client, model, settings):
            if plan_checkpoint(self._history.rows) is not None:
                return OverBudget()
        self.set_activity(f"provider turn {step}/{max_turns}")
        self.provider_turns += 1
        turn = Turn(
            session_id=sid, assistant_id=self._p.ids.new("msg"), agent=agent, model=model,
            append=self._append, hub=self._p.hub, now=self._p.now_ms, registry=location.registry,
            directory=info.location.directory, permissions=self._p.permissions,
        )  # fmt: skip
        if self._title_prompt is not None:
            title_soon(self._nursery, self._p, self._location(), sid, self._title_prompt, model)
            self._title_prompt = None
        self._turn, self._turn_open = turn, True
        with span("provider.turn", turn_attributes(sid, model, step)) as current_span:
            outcome = await run_turn(client=client, request=request, turn=turn)
            turn.describe(current_span)
        self._turn_open = False
        self._budget.counted(turn.usage if outcome.error is None else None)
        return outcome

    async def _compact(self, reason: ev.CompactionReason, *, overflow: bool) -> Compacted:
        """Perform one compaction attempt (``actors.session._compaction``); report whether it
        completed."""
        info = self._p.session_info(self.session_id)
        location = await self._p.location(info.location.directory)
        model = session_model(info, self._agent(), location.settings, self._p.default_model)
        client = self._p.client_for(location)
        self.set_activity(f"compacting ({reason})")
        await self._refresh_history()
        self._history.hide(hidden_ranges(info))
        attempt = attempt_for(
            self.session_id, reason, overflow=overflow, rows=list(self._history.rows),
            model=model, settings=location.settings, client=client, tokens_before=self._budget.estimate,
        )  # fmt: skip
        outcome = await compact(
            attempt, client=client, storage=self._p.storage, hub=self._p.hub, ids=self._p.ids,
            now_ms=self._p.now_ms, plugins=location.plugins,
        )  # fmt: skip
        if outcome == "completed":
            await self._refresh_history()
        return Compacted(completed=outcome == "completed")

    async def _append(self, events: list[ev.DurableEvent]) -> list[ev.InputAdmitted]:
        """Append *events*; return the inbox rows still pending after them. A failed step
        among them (a provider error ended the turn) also fails the run: ``run.failed``
        goes in the same batch, so the session's ``last_error`` shows it."""
        sid = self.session_id
        failed = run_failure(events, sid, failure_tag(self._turn))
        if failed is not None:
            events = [*events, failed]
            self.last_error = f"{failed.error.tag}: {failed.error.message}"
        lease = self._lease  # cluster mode: a turn's last write parks it, unless input waits
        park = lease.parking(events) if lease is not None else None
        pending = await self._p.storage.write(
            AppendWithPending(session_id=sid, events=events, park=park)
        )
        if lease is not None and park is not None and not pending:
            lease.parked_now()
        return pending
