"""The actor base class, its statistics, and calls with one-shot replies.

An actor's mailbox outlives its runs: a restart keeps queued messages, but every call
still waiting when the actor crashes fails with ``ActorCrashed``, because its caller
cannot know whether the crashed run had taken its message.
"""

from __future__ import annotations

import abc
import logging
import traceback
from collections.abc import Callable
from typing import Any, ClassVar, Final, Generic, Literal, TypeVar

import msgspec
import trio

from actors.kernel._errors import ActorCrashed, ActorStopped
from actors.kernel._mailbox import Mailbox, Reply

__all__ = ["Actor", "ActorState", "ActorStatistics", "call", "current_time", "held"]

M = TypeVar("M")
T = TypeVar("T")

ActorState = Literal["starting", "running", "restarting", "passivated", "stopped", "dead"]

_FINAL_STATES: Final = frozenset({"stopped", "dead"})
_CAUSE_FRAMES: Final = 3
_CAUSE_CHARS: Final = 2000
_log = logging.getLogger("kittiwake.actors")


def current_time() -> float:
    """The kernel's clock: ``trio.current_time()``, so ``MockClock`` drives it in tests."""
    return trio.current_time()


class ActorStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of one actor, for the inspector's table and tree."""

    id: str
    kind: str
    label: str
    state: ActorState
    mailbox_depth: int
    mailbox_bound: int | None
    """``None`` when the mailbox is unbounded."""
    mailbox_peak: int
    blocked_senders: int
    messages_in: int
    messages_out: int
    restarts: int
    """Restarts since the actor was created."""
    last_death_cause: str | None
    """Short traceback of the last crash."""
    restart_budget: int | None
    """Crashes the supervisor still tolerates now; ``None`` without a supervisor."""
    current_activity: str
    since: float
    """Clock time when the current state or activity began."""
    phase_seconds: float
    """Seconds spent in the current state or activity."""
    age: float
    """Seconds since the actor was first started."""
    last_error: str | None = None
    """What ended the actor's last failed piece of work, for actors that report one
    (a SessionActor: its last failed drain)."""


class Actor(abc.ABC, Generic[M]):
    """A trio task that serves a mailbox, run and restarted by a supervisor.

    Subclasses set ``kind``, pass a mailbox with an explicit bound, and implement
    :meth:`run`. Each run rebuilds the actor's state from scratch, calls
    :meth:`mark_running` once it is ready, and serves ``self.mailbox``.

    Args:
        actor_id: unique among live actors.
        mailbox: the actor's address; it outlives restarts.
        label: a human description (the session or location it serves).
    """

    kind: ClassVar[str] = "actor"

    def __init__(self, actor_id: str, *, mailbox: Mailbox[M], label: str = "") -> None:
        self._id = actor_id
        self._label = label
        self.mailbox = mailbox
        self._state: ActorState = "starting"
        self._activity = ""
        self._since: float | None = None
        self._born: float | None = None
        self._restarts = 0
        self._last_cause: str | None = None
        self._pending: set[Reply[Any]] = set()
        self._owned = False
        self._restart_budget: Callable[[], int] | None = None
        self._on_running: Callable[[], None] | None = None
        self._task: trio.lowlevel.Task | None = None

    @abc.abstractmethod
    async def run(self) -> None:
        """Serve the mailbox; returning stops the actor for good, raising restarts it."""

    @property
    def id(self) -> str:
        """The actor's unique id."""
        return self._id

    @property
    def label(self) -> str:
        """A human description of what the actor serves."""
        return self._label

    @property
    def state(self) -> ActorState:
        """Where the actor is in its life."""
        return self._state

    @property
    def current_activity(self) -> str:
        """What the actor said it is doing, e.g. ``"provider turn 3/25"``."""
        return self._activity

    @property
    def since(self) -> float | None:
        """Clock time the current state or activity began; ``None`` before the first start."""
        return self._since

    @property
    def task(self) -> trio.lowlevel.Task | None:
        """The trio task of the current run, for on-demand stack dumps."""
        return self._task

    def mark_running(self) -> None:
        """Tell the kernel this run has rebuilt its state and serves its mailbox."""
        if self._state in ("starting", "restarting"):
            self._set_state("running")
        if self._on_running is not None:
            on_running, self._on_running = self._on_running, None
            on_running()

    def set_activity(self, activity: str) -> None:
        """Record what the actor is doing now; resets the phase clock."""
        self._activity = activity
        self._since = current_time()

    def statistics(self) -> ActorStatistics:
        """Return a snapshot of state, mailbox, restarts and activity."""
        now = current_time()
        box = self.mailbox.statistics()
        return ActorStatistics(
            id=self._id,
            kind=self.kind,
            label=self._label,
            state=self._state,
            mailbox_depth=box.depth,
            mailbox_bound=box.bound,
            mailbox_peak=box.peak_depth,
            blocked_senders=box.blocked_senders,
            messages_in=box.messages_in,
            messages_out=box.messages_out,
            restarts=self._restarts,
            last_death_cause=self._last_cause,
            restart_budget=None if self._restart_budget is None else self._restart_budget(),
            current_activity=self._activity,
            since=now if self._since is None else self._since,
            phase_seconds=0.0 if self._since is None else now - self._since,
            age=0.0 if self._born is None else now - self._born,
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._id!r} {self._state}>"

    # Kernel side: used by supervisors and run_root, not by actors.

    def _claim(self, restart_budget: Callable[[], int] | None) -> None:
        """Take ownership before a supervisor starts the actor."""
        if self._owned:
            raise RuntimeError(f"{self!r} is already running under a supervisor")
        if self._state in _FINAL_STATES:
            raise RuntimeError(f"{self!r} cannot be started again")
        self._owned = True
        self._restart_budget = restart_budget
        if self._born is None:
            self._born = current_time()
        self._set_state("starting")

    async def _run_once(self) -> BaseException | None:
        """Run once; return the crash, or ``None`` on a clean return. Cancellation propagates."""
        crash: BaseException | None = None
        self._task = trio.lowlevel.current_task()
        self._activity = ""
        try:
            await self.run()
        except* Exception as group:
            crash = _unwrap(group)
        return crash

    def _crashed(self, crash: BaseException) -> None:
        """Record a crash and fail every call still waiting on this actor."""
        self._last_cause = _describe(crash)
        _log.warning("actor %r crashed", self._id, exc_info=crash)
        summary = traceback.format_exception_only(crash)[-1].strip()
        for reply in self._pending:
            error = ActorCrashed(self._id, summary)
            error.__cause__ = crash
            reply._settle(error)
        self._pending.clear()

    def _restarting(self) -> None:
        self._restarts += 1
        self._set_state("restarting")

    def _release(self, state: ActorState) -> None:
        """Leave the supervisor in *state*; a final state closes the mailbox."""
        self._owned = False
        self._task = None
        self._on_running = None
        self._set_state(state)
        for reply in self._pending:
            reply._settle(ActorStopped(self._id, state))
        self._pending.clear()
        if state in _FINAL_STATES:
            self.mailbox.close()

    def _set_state(self, state: ActorState) -> None:
        self._state = state
        self._since = current_time()


class held:
    """Hold *reply* for *actor* while the ``with`` block waits on it.

    Held, the reply is failed if the actor crashes (``ActorCrashed``) or stops
    (``ActorStopped``); leaving the block, however, abandons it, so a late answer is
    dropped. A plain class, not a generator: it sits on every call's path.
    """

    __slots__ = ("_actor", "_reply")

    def __init__(self, actor: Actor[Any], reply: Reply[Any]) -> None:
        self._actor = actor
        self._reply = reply

    def __enter__(self) -> None:
        self._actor._pending.add(self._reply)

    def __exit__(self, *exc: object) -> None:
        self._actor._pending.discard(self._reply)
        self._reply._abandon()


async def call(actor: Actor[M], make_message: Callable[[Reply[T]], M]) -> T:
    """Send *actor* the message ``make_message(reply)`` and wait for its answer.

    Put a timeout around the call at the call site if the answer may be slow.
    Cancelling the caller abandons the reply; a late answer is dropped.

    Raises:
        ActorCrashed: the actor crashed while the call was waiting.
        ActorStopped: the actor is stopped, passivated or dead, or stopped while waiting.
    """
    if actor.state in ("passivated", "stopped", "dead"):
        raise ActorStopped(actor.id, actor.state)
    reply: Reply[T] = Reply()
    with held(actor, reply):
        message = make_message(reply)
        try:
            try:
                actor.mailbox.send_nowait(message)  # reply.wait is the checkpoint
            except trio.WouldBlock:
                await actor.mailbox.send(message)
        except trio.BrokenResourceError:
            raise ActorStopped(actor.id, actor.state) from None
        return await reply.wait()


def _unwrap(group: BaseExceptionGroup[Exception]) -> BaseException:
    """Return the lone error of a group ``except*`` made, else the group itself."""
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        group = group.exceptions[0]  # type: ignore[assignment]
    return group


def _describe(crash: BaseException) -> str:
    """A short traceback: the last few frames and the error, at most ~2000 chars."""
    text = "".join(traceback.format_exception(crash, limit=-_CAUSE_FRAMES)).strip()
    return text if len(text) <= _CAUSE_CHARS else "..." + text[-_CAUSE_CHARS:]
