"""Cluster mode: this runtime is one worker among others on one PostgreSQL database.

Every worker may *write* any session (an admission, a reply, an interrupt is durable first,
from the worker that received it); only the holder of a session's lease *drives* it (runs
its drains). ``docs/cluster.md`` tells the whole model; this module holds the actors' side:

- :class:`SessionLease`: one SessionActor's lease. Acquired at the start of a drain chain,
  renewed every ``ClusterOptions.renew_every`` seconds while it runs (a lost lease cancels
  the drain: interrupted by a takeover, not failed), parked by the turn's last write (or
  when the chain ends): kept under its token for ``ClusterOptions.lease_idle`` seconds,
  so the next prompt's drain takes it back (in its admission's own batch when admitted
  here) instead of acquiring it again; any other worker may acquire a parked lease
  meanwhile.
- :data:`DRAIN_FENCE`: the token of the lease the current task drives under. The
  StorageActor stamps it on every command with a ``fence`` field written from that task or
  the tasks it starts, so a stale driver's writes are refused by the store (``LeaseLost``).
- :class:`Relay`: feeds this worker with what other workers commit, from the store's
  notifications plus catch-up reads by seq: the event hub (streams on this worker see every
  worker's events, with no gap and no duplicate), and the sessions this worker drives (a
  prompt admitted elsewhere wakes them, an interrupt stops them, a permission reply or a
  question's answer reaches the waiting tool call).
- :func:`sweep`: every ``sweep_every`` seconds, sessions whose lease expired with work left
  (pending input, or a drain cut short) are woken here; the wake acquires the lease and
  the actor recovers the session exactly as a restart does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Protocol

import msgspec
import trio

from actors.kernel import EventHub
from actors.store import DRAIN_FENCE, StorageActor
from runtime import StorageError
from runtime import events as ev
from runtime.drain import WAKE_ANY
from runtime.events import decode_event
from storage import (
    AcquireLease,
    EventsTail,
    Lease,
    LeaseLost,
    LeaseOf,
    Orphans,
    ParkLease,
    PendingInputs,
    ReleaseLease,
    RenewLease,
    StoredEvent,
)


class _Driven(Protocol):
    @property
    def driving(self) -> bool: ...


class _RepliesElsewhere(Protocol):
    def replied_elsewhere(self, request_id: str, reply: Any) -> None: ...


class _Execution(Protocol):
    """What cluster routing uses of session execution (``actors.session.SessionExecution``)."""

    @property
    def permissions(self) -> _RepliesElsewhere: ...

    def active(self, session_id: str) -> _Driven | None: ...

    async def wake(self, session_id: str, seq: int) -> None: ...

    async def interrupt(self, session_id: str, seq: int | None = None) -> None: ...


__all__ = [
    "DRAIN_FENCE",
    "ClusterOptions",
    "Relay",
    "SessionLease",
    "sweep",
    "wait_elsewhere",
]

_log = logging.getLogger("kittiwake.cluster")
_PAGE: Final = 500
_ADMITTED: Final = ev.PromptAdmitted.__struct_config__.tag
_INTERRUPTED: Final = ev.InterruptRequested.__struct_config__.tag
_REPLIED: Final = ev.PermissionReplied.__struct_config__.tag
_ANSWERED: Final = (
    ev.QuestionReplied.__struct_config__.tag,
    ev.QuestionRejected.__struct_config__.tag,
)

DEFAULT_LEASE_TTL: Final = 10.0
DEFAULT_RENEW_EVERY: Final = 3.0
DEFAULT_SWEEP_EVERY: Final = 5.0
DEFAULT_LEASE_IDLE: Final = 5.0


class ClusterOptions(msgspec.Struct, frozen=True):
    """A worker's identity and its lease timings (seconds).

    ``renew_every`` must stay under a third of ``lease_ttl``, so that two renewals can fail
    (a slow commit, a busy event loop) before the lease expires.
    """

    owner: str
    lease_ttl: float = DEFAULT_LEASE_TTL
    renew_every: float = DEFAULT_RENEW_EVERY
    sweep_every: float = DEFAULT_SWEEP_EVERY
    sweep_limit: int = 100
    """Sessions one sweep wakes at most."""
    wait_poll: float = 0.05
    """How often a ``wait`` on a worker that does not drive the session looks again
    (a park commits no event to wake it)."""
    lease_idle: float = DEFAULT_LEASE_IDLE
    """How long a lease stays parked once its drains went idle: the session's next drain
    within it takes the lease back under the same token (no acquisition), after it the
    lease is free. 0: free at once, as a release."""

    def __post_init__(self) -> None:
        if not self.owner:
            raise ValueError("a cluster worker needs an owner id")
        if not 0 < self.renew_every * 3 <= self.lease_ttl:
            raise ValueError("renew_every must be positive and at most a third of lease_ttl")
        if not self.lease_idle >= 0:
            raise ValueError("lease_idle must be 0 or more seconds")


class SessionLease:
    """One SessionActor's lease on its session (cluster mode); see the module doc.

    ``token`` is the fencing token while held (driving or parked), else None.
    ``taken_over`` says the last acquisition found the previous holder's lease expired
    unreleased (its drain may have been cut short: the actor recovers the session as a
    restart would). A parked lease counts as held until ``lease_idle`` seconds after it
    was parked (the store frees it then, on its own clock); taking it back may still
    find it acquired by another worker meanwhile.
    """

    def __init__(self, storage: StorageActor, session_id: str, options: ClusterOptions) -> None:
        self._storage = storage
        self._session_id = session_id
        self._options = options
        self.token: int | None = None
        self._last = -1
        """The token of this actor's previous lease."""
        self._parked_at: float | None = None
        """When the lease was parked (trio's clock), while it is."""
        self._park_sent: float | None = None
        """When the write that parked it was sent (trio's clock)."""
        self.fresh = True
        """Another worker held the lease between this one's last and this acquisition."""
        self.taken_over = False
        self.lost = False
        """The lease was lost while driving (a renewal refused, or a write fenced off)."""
        self.reserved: RenewLease | None = None
        """The renewal of the lease parked here when an admission's opening was reserved."""

    @property
    def held(self) -> bool:
        """Whether this actor holds the lease, driving or parked (within ``lease_idle``)."""
        if self.token is None or self.lost:
            return False
        parked = self._parked_at
        return parked is None or trio.current_time() - parked < self._options.lease_idle

    @property
    def parked(self) -> bool:
        """Whether this actor holds the lease parked (its drains idle)."""
        return self._parked_at is not None and self.held

    def parked_since(self, moment: float) -> bool:
        """Whether the lease is parked here by a write sent after *moment* (trio's clock):
        that write found no input pending and no other worker driving when it committed,
        so whatever was admitted before *moment* is driven."""
        return self.parked and self._park_sent is not None and self._park_sent > moment

    def parking(self, events: Sequence[ev.DurableEvent]) -> ParkLease | None:
        """The park a turn's write of *events* carries (``AppendWithPending(park=...)``)
        when they end its step with "stop" (no tool call to run: likely the drain's last
        write) and the lease drives here; call :meth:`parked_now` if the write's answer
        shows it parked (nothing pending)."""
        last = events[-1] if events else None
        if not isinstance(last, ev.StepEnded) or last.finish != "stop":
            return None
        if not self.held or self._parked_at is not None or self.token is None:
            return None
        self._park_sent = trio.current_time()
        return self._park(self.token)

    def parked_now(self) -> None:
        """The write carrying :meth:`parking`'s park committed it."""
        self._parked_at = trio.current_time()

    async def take_back(self) -> bool:
        """Take back the lease parked here under its token; False when another worker
        acquired it meanwhile (forgotten here)."""
        if self.token is not None and await self._write(self._renewal(self.token)) is not None:
            self._taken_back()
            return True
        self.token, self._parked_at = None, None
        return False

    async def drive_again(self) -> bool:
        """Before the drain writes again (a compaction, a failure, another turn), take back
        the lease a turn's last write parked; False (the lease marked lost) when another
        worker acquired it meanwhile: the drain stops, as after a takeover."""
        parked = self._parked_at is not None  # however long ago: nobody else drove since
        if parked and not self.lost and not await self.take_back():
            self.lost = True
        return not self.lost

    def reserve(self) -> bool:
        """Reserve an admission's opening under the lease parked here (``reserved``, the
        renewal its batch sends: ``AdmitAndOpen(lease=...)``); False when not parked."""
        self.reserved = self.opening()
        return self.reserved is not None

    def _park(self, token: int) -> ParkLease:
        return ParkLease(
            session_id=self._session_id, owner=self._options.owner, token=token,
            idle_ms=int(self._options.lease_idle * 1000),
        )  # fmt: skip

    def opening(self) -> RenewLease | None:
        """The renewal an admission made here sends in its own batch to open the session's
        next activity under the parked lease (``AdmitAndOpen(lease=...)``), or None when
        the lease is not parked here."""
        if not self.parked or self.token is None:
            return None
        return self._renewal(self.token)

    def opened(self, *, taken_back: bool) -> None:
        """What the admission's batch did with :meth:`opening`'s renewal: the lease taken
        back, or refused (another worker acquired it: forgotten here)."""
        if taken_back:
            self._taken_back()
        else:
            self.token, self._parked_at = None, None

    async def acquire(self) -> bool:
        """Hold the lease to drive: kept when it drives already (an admission took it back),
        taken back under its token when parked here, else acquired; False when another
        worker holds it unexpired (it drives), or when the write failed to commit (logged;
        if it did commit, the lease expires and the sweep finds the session). Sets
        ``fresh`` when another worker held the lease since this one last did (tokens grow
        by one per acquisition) and ``taken_over``. Cancellation abandons the wait (an
        acquisition that committed expires)."""
        if self.held and self._parked_at is None:
            return True
        if self.parked and await self.take_back():
            return True
        self.token, self._parked_at = None, None
        lease = await self._write(
            AcquireLease(
                session_id=self._session_id, owner=self._options.owner,
                ttl_ms=int(self._options.lease_ttl * 1000),
            )
        )  # fmt: skip
        self.lost = False
        if lease is None:
            return False
        self.fresh = lease.token != self._last + 1
        self.token = self._last = lease.token
        self.taken_over = lease.taken_over
        return True

    def _taken_back(self) -> None:
        self._parked_at, self.lost = None, False
        self.fresh = self.taken_over = False

    def _renewal(self, token: int) -> RenewLease:
        return RenewLease(
            session_id=self._session_id, owner=self._options.owner, token=token,
            ttl_ms=int(self._options.lease_ttl * 1000),
        )  # fmt: skip

    async def _write(self, command: AcquireLease | RenewLease) -> Lease | None:
        try:
            return await self._storage.write(command)
        except StorageError as exc:
            _log.warning("lease not acquired", extra={"session": self._session_id}, exc_info=exc)
            return None

    @asynccontextmanager
    async def driving(self, scope: trio.CancelScope) -> AsyncIterator[None]:
        """Drive under the lease for the block: the task's writes carry its token
        (:data:`DRAIN_FENCE`) and a background task renews it every ``renew_every``
        seconds. A renewal the store refuses marks the lease ``lost`` and cancels
        *scope* (the drain stops: interrupted by a takeover). A renewal that fails to
        commit is tried again at the next interval (the lease may expire meanwhile: then
        the next renewal is refused)."""
        assert self.token is not None, "acquire the lease first"
        reset = DRAIN_FENCE.set((self._session_id, self.token))
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._renew, scope)
                try:
                    yield
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            DRAIN_FENCE.reset(reset)

    async def _renew(self, scope: trio.CancelScope) -> None:
        while True:
            await trio.sleep(self._options.renew_every)
            if self._parked_at is not None:
                continue  # the turn's last write parked it: a renewal would take it back
            try:
                lease = await self._storage.write(self._renewal(self.token or 0))
            except StorageError as exc:
                _log.warning(
                    "lease renewal failed", extra={"session": self._session_id}, exc_info=exc
                )
                continue
            if lease is None:
                self.lost = True
                _log.warning(
                    "lease lost to another worker; writes refused",
                    extra={"session": self._session_id},
                )
                scope.cancel()
                return

    def fenced_off(self, exc: BaseException) -> bool:
        """Whether *exc* (or an exception it groups) is the store refusing a write by
        this lease's token; marks the lease lost if so."""
        if isinstance(exc, LeaseLost) or (
            isinstance(exc, BaseExceptionGroup) and exc.subgroup(LeaseLost) is not None
        ):
            self.lost = True
        return self.lost

    async def park(self, *, keep_for_pending: bool = True) -> bool:
        """Park the lease now that the drains are idle (bounded, shielded); True when the
        store found input pending instead (admitted elsewhere while this worker drove):
        the lease still drives, and that input is this worker's to drive. Without
        *keep_for_pending* the lease is released instead (input that could not be
        promoted waits for the next wake, here or elsewhere). A park or release that
        fails to commit lets the lease expire (logged); a lost lease is forgotten."""
        if self.parked:
            return False  # the turn's last write parked it
        token, self.token = self.token, None
        if token is None or self.lost:
            return False
        self._park_sent = trio.current_time()
        command: ParkLease | ReleaseLease = (
            self._park(token)
            if keep_for_pending
            else ReleaseLease(session_id=self._session_id, owner=self._options.owner, token=token)
        )
        lease: Lease | None = None
        with trio.move_on_after(self._options.renew_every, shield=True):
            try:
                lease = await self._storage.write(command)
            except StorageError as exc:
                _log.warning(
                    "lease park failed; it expires", extra={"session": self._session_id},
                    exc_info=exc,
                )  # fmt: skip
        if lease is None or self.token is not None:  # lost, or acquired again meanwhile
            return False
        self.token = token
        self._parked_at = trio.current_time() if lease.parked else None
        return not lease.parked


class Relay:
    """Feeds this worker with other workers' commits (see the module doc).

    For each notification ``(session_id, first, last)`` of a session this worker cares
    about (a stream or a wait follows it, every session's stream is open, or its actor
    drives it here: holds its lease, driving or parked), the events from the last one
    relayed (else *first*) through *last* are read by seq, published to the hub and
    dispatched: an admission wakes the session's actor, an interrupt interrupts it, a
    permission reply reaches the tool call waiting for it. A session no one here cares
    about costs no read, even with its actor active here without the lease (it drove the
    session before another worker acquired the lease): dispatching would do nothing
    there, and that actor reads the session again once it acquires the lease
    (``SessionActor._adopt_lease``); the caches' version checks find what changed.
    """

    def __init__(
        self, storage: StorageActor, hub: EventHub, execution: _Execution,
        questions: _RepliesElsewhere | None = None,
    ) -> None:  # fmt: skip
        self._questions = questions
        self._storage = storage
        self._hub = hub
        self._x = execution
        self._relayed: dict[str, int] = {}

    def _cares(self, session_id: str) -> bool:
        if self._hub.follows(session_id):
            return True
        actor = self._x.active(session_id)
        return actor is not None and actor.driving

    async def run(self, notifications: trio.MemoryReceiveChannel[tuple[str, int, int]]) -> None:
        """Relay until cancelled. A read that fails is logged; the streams re-read the
        store on the next gap, and a missed wake is found by the sweep."""
        async with trio.open_nursery() as nursery:
            async for session_id, first, last in notifications:
                if not self._cares(session_id):
                    self._relayed.pop(session_id, None)
                    continue
                after = max(self._relayed.get(session_id, first - 1), first - 1)
                if last <= after:
                    continue
                try:
                    events = await self._read(session_id, after, last)
                except StorageError as exc:
                    _log.warning("relay read failed", extra={"session": session_id}, exc_info=exc)
                    continue
                self._relayed[session_id] = last
                self._hub.publish(events)
                self._dispatch(nursery, session_id, events)

    async def _read(self, session_id: str, after: int, last: int) -> list[StoredEvent]:
        events: list[StoredEvent] = []
        while after < last:
            page, _ = await self._storage.read(
                EventsTail(session_id=session_id, after=after, limit=_PAGE)
            )
            if not page:
                break
            events += [e for e in page if e.seq <= last]
            after = page[-1].seq
        return events

    def _dispatch(self, nursery: trio.Nursery, session_id: str, events: list[StoredEvent]) -> None:
        actor = self._x.active(session_id)
        if actor is None:
            return
        for stored in events:
            if stored.type == _ADMITTED and actor.driving:
                nursery.start_soon(self._x.wake, session_id, stored.seq)
            elif stored.type == _INTERRUPTED and actor.driving:
                nursery.start_soon(self._x.interrupt, session_id, stored.seq)
            elif stored.type == _REPLIED:
                event = decode_event(stored.data)
                assert isinstance(event, ev.PermissionReplied)
                self._x.permissions.replied_elsewhere(event.request_id, event.reply)
            elif stored.type in _ANSWERED and self._questions is not None:
                event = decode_event(stored.data)
                answers = event.answers if isinstance(event, ev.QuestionReplied) else None
                assert isinstance(event, ev.QuestionReplied | ev.QuestionRejected)
                self._questions.replied_elsewhere(event.request_id, answers)


async def sweep(storage: StorageActor, execution: _Execution, options: ClusterOptions) -> None:
    """Wake, every ``sweep_every`` seconds (the first time at once), the sessions whose
    lease expired (or was never taken) with work left: unpromoted input, or a drain cut
    short. The wake acquires the lease; the actor recovers the session as a restart does.
    A failed read is logged and tried at the next interval. Runs until cancelled."""
    while True:
        try:
            orphans = await storage.read(Orphans(limit=options.sweep_limit))
        except StorageError as exc:
            _log.warning("the sweep for orphaned sessions failed", exc_info=exc)
            orphans = []
        for session_id in orphans:
            await execution.wake(session_id, WAKE_ANY)
        await trio.sleep(options.sweep_every)


async def wait_elsewhere(
    storage: StorageActor, hub: EventHub, session_id: str, options: ClusterOptions
) -> None:
    """Wait until no worker drives the session and none has input of it to drive: no
    live lease or a parked one, and no unpromoted input. Re-checked after each of the
    session's events relayed here, and every ``wait_poll`` seconds (a park commits no
    event). Cancellation ends the wait."""
    with hub.subscribe(session_id) as sub:
        while True:
            if await _settled(storage, session_id):
                return
            with trio.move_on_after(options.wait_poll):
                await sub.receive()


async def _settled(storage: StorageActor, session_id: str) -> bool:
    """Whether no worker drives the session (no live lease, or a parked one) and none of
    its input is pending: the two reads are sent together, so they are answered in one
    round trip."""
    leases: list[Lease | None] = []

    async def lease_of() -> None:
        leases.append(await storage.read(LeaseOf(session_id=session_id)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lease_of)
        pending = await storage.read(PendingInputs(session_id=session_id))
    lease = leases[0]
    return (lease is None or lease.parked) and not pending
