"""One-for-one supervision with a restart intensity limit, as in OTP.

A child that raises any ``Exception`` is run again (a fresh ``run()``), unless it has
crashed more than ``max_restarts`` times within ``within_seconds``: then the child is
``dead`` and the supervisor raises ``Escalation``, which cancels its other children and
fails the supervisor, so its own parent decides. The window is counted per child, so
one crash-looping session cannot spend the budget of the others. A clean return or a
cancellation is not a crash.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec
import trio

from actors.kernel._actor import Actor, ActorState, current_time
from actors.kernel._errors import ActorNotFound, DuplicateActor, Escalation
from actors.kernel._mailbox import open_mailbox

if TYPE_CHECKING:
    from actors.kernel._directory import ActorDirectory

__all__ = ["DEFAULT_POLICY", "Supervisor", "SupervisorPolicy", "run_root"]


class SupervisorPolicy(msgspec.Struct, frozen=True):
    """How many crashes a supervisor tolerates per child before it escalates.

    Args:
        max_restarts: restarts allowed inside the window; one more crash escalates.
        within_seconds: the sliding window's length.
    """

    max_restarts: int
    within_seconds: float

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")
        if not self.within_seconds > 0:
            raise ValueError(f"within_seconds must be > 0, got {self.within_seconds}")


DEFAULT_POLICY = SupervisorPolicy(max_restarts=3, within_seconds=5.0)


class _RestartWindow:
    """Crash times of one child inside the policy's sliding window."""

    def __init__(self, policy: SupervisorPolicy) -> None:
        self._policy = policy
        self._times: deque[float] = deque()

    def note(self, now: float) -> int:
        """Record a crash at *now*; return the crashes inside the window."""
        self._prune(now)
        self._times.append(now)
        return len(self._times)

    def remaining(self) -> int:
        """Crashes still tolerated now."""
        self._prune(current_time())
        return max(0, self._policy.max_restarts - len(self._times))

    def _prune(self, now: float) -> None:
        while self._times and self._times[0] <= now - self._policy.within_seconds:
            self._times.popleft()


class _Child:
    """A supervised child: its actor, cancel scope and how it should end."""

    def __init__(self, actor: Actor[Any], policy: SupervisorPolicy) -> None:
        self.actor = actor
        self.window = _RestartWindow(policy)
        self.scope = trio.CancelScope()
        self.done = trio.Event()
        self.end_state: ActorState = "stopped"


class Supervisor(Actor[NoReturn]):
    """An actor whose run owns a nursery of children it restarts one for one.

    It takes no messages (its mailbox is closed). Subclasses start the children every
    fresh run begins with in :meth:`start_initial_children`; others come and go with
    :meth:`start_child`, :meth:`stop_child` and :meth:`passivate_child`.

    Args:
        actor_id: unique among live actors.
        policy: the restart intensity limit applied to each child.
        directory: where children are registered while they are supervised.
        label: a human description.
    """

    kind = "supervisor"

    def __init__(
        self,
        actor_id: str,
        *,
        policy: SupervisorPolicy = DEFAULT_POLICY,
        directory: ActorDirectory | None = None,
        label: str = "",
    ) -> None:
        mailbox = open_mailbox(0)
        mailbox.close()
        super().__init__(actor_id, mailbox=mailbox, label=label)
        self.policy = policy
        self._directory = directory
        self._children: dict[str, _Child] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self) -> None:
        """Open the children's nursery and supervise until cancelled or escalating."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                await self.start_initial_children()
                self.mark_running()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    async def start_initial_children(self) -> None:
        """Start the children each fresh run begins with; none by default."""

    def children(self) -> tuple[Actor[Any], ...]:
        """The children supervised now, in start order."""
        return tuple(child.actor for child in self._children.values())

    def start_child(self, actor: Actor[Any]) -> None:
        """Start supervising *actor*; never blocks (it is ``starting`` until it runs).

        A passivated actor may be started again; its mailbox kept what was queued.

        Raises:
            DuplicateActor: a child or registered actor already has its id.
            RuntimeError: the supervisor is not running, or *actor* is running
                elsewhere, stopped or dead.
        """
        if self._nursery is None:
            raise RuntimeError(f"{self!r} is not running; it cannot start children")
        if actor.id in self._children:
            raise DuplicateActor(actor.id)
        child = _Child(actor, self.policy)
        if self._directory is not None:
            self._directory.register(actor, parent=self.id)
        try:
            actor._claim(child.window.remaining)
        except RuntimeError:
            if self._directory is not None:
                self._directory.unregister(actor.id)
            raise
        self._children[actor.id] = child
        self._nursery.start_soon(self._child_task, child, name=f"actor:{actor.id}")

    async def stop_child(self, actor_id: str) -> None:
        """Cancel a child's run and wait for it to end ``stopped``; its mailbox closes.

        Raises:
            ActorNotFound: no such child.
        """
        await self._end_child(actor_id, "stopped")

    async def passivate_child(self, actor_id: str) -> None:
        """Cancel a child's run and wait for it to end ``passivated``.

        Its mailbox stays open, so it can be started again later.

        Raises:
            ActorNotFound: no such child.
        """
        await self._end_child(actor_id, "passivated")

    async def _end_child(self, actor_id: str, state: ActorState) -> None:
        child = self._children.get(actor_id)
        if child is None:
            raise ActorNotFound(actor_id)
        child.end_state = state
        child.scope.cancel()
        await child.done.wait()

    async def _child_task(self, child: _Child) -> None:
        actor = child.actor
        try:
            with child.scope:
                await self._supervise(child)
        finally:
            del self._children[actor.id]
            if self._directory is not None:
                self._directory.unregister(actor.id)
            actor._release("dead" if actor.state == "dead" else child.end_state)
            child.done.set()

    async def _supervise(self, child: _Child) -> None:
        actor = child.actor
        while True:
            crash = await actor._run_once()
            if crash is None:
                return
            actor._crashed(crash)
            crashes = child.window.note(current_time())
            if crashes > self.policy.max_restarts:
                actor._set_state("dead")
                within = self.policy.within_seconds
                raise Escalation(self.id, actor.id, crashes, within) from crash
            actor._restarting()
            await trio.lowlevel.checkpoint()


async def run_root(
    actor: Actor[Any], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run *actor* with no supervisor above it, e.g. the runtime's root supervisor.

    Use ``await nursery.start(run_root, root)``: it returns once the actor called
    ``mark_running``. A crash is not restarted; it propagates into the nursery.
    """
    actor._claim(None)
    actor._on_running = task_status.started
    end_state: ActorState = "stopped"
    try:
        crash = await actor._run_once()
        if crash is not None:
            actor._crashed(crash)
            end_state = "dead"
            raise crash
    finally:
        actor._release(end_state)
