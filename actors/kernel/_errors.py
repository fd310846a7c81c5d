"""Errors of the actor kernel.

Exception tree::

    ActorError              base of every error the kernel raises on purpose
    ├── ActorCrashed        a called actor raised before it answered (cause chained)
    ├── ActorStopped        a called actor stopped, was passivated, or cannot be called
    ├── Escalation          a child crashed more often than its supervisor's policy allows
    ├── ActorNotFound       no live actor has that id (also ``LookupError``)
    └── DuplicateActor      an actor id is already taken (also ``ValueError``)

Mailboxes raise trio's own channel errors: ``trio.WouldBlock`` from the ``*_nowait``
twins, ``trio.BrokenResourceError`` when sending to a mailbox whose actor is gone, and
``trio.ClosedResourceError`` when receiving from a mailbox that was closed. API misuse
(an unbounded mailbox without a reason, starting a running actor) is ``TypeError``,
``ValueError`` or ``RuntimeError``.
"""

from __future__ import annotations

__all__ = [
    "ActorCrashed",
    "ActorError",
    "ActorNotFound",
    "ActorStopped",
    "DuplicateActor",
    "Escalation",
]


class ActorError(Exception):
    """Base class of the actor kernel's errors."""


class ActorCrashed(ActorError):
    """The actor raised before answering a call; the original error is ``__cause__``.

    Args:
        actor_id: the actor that crashed.
        cause: a one-line description of the error that killed it.
    """

    def __init__(self, actor_id: str, cause: str) -> None:
        super().__init__(f"actor {actor_id!r} crashed before answering: {cause}")
        self.actor_id = actor_id
        self.cause = cause


class ActorStopped(ActorError):
    """The actor is not serving calls: it stopped, was passivated or is dead.

    Args:
        actor_id: the actor that was called.
        state: its state when the call failed.
    """

    def __init__(self, actor_id: str, state: str) -> None:
        super().__init__(f"actor {actor_id!r} is {state} and cannot answer")
        self.actor_id = actor_id
        self.state = state


class Escalation(ActorError):
    """A child exceeded its supervisor's restart intensity; the last crash is ``__cause__``.

    Raised inside the supervisor, so the supervisor itself fails and its parent decides.

    Args:
        supervisor_id: the supervisor that gave up.
        actor_id: the child that kept crashing.
        crashes: crashes counted inside the window.
        within_seconds: the window's length.
    """

    def __init__(
        self, supervisor_id: str, actor_id: str, crashes: int, within_seconds: float
    ) -> None:
        super().__init__(
            f"supervisor {supervisor_id!r} gives up on {actor_id!r}: "
            f"{crashes} crashes within {within_seconds:g} s"
        )
        self.supervisor_id = supervisor_id
        self.actor_id = actor_id
        self.crashes = crashes
        self.within_seconds = within_seconds


class ActorNotFound(ActorError, LookupError):
    """No live actor is registered under this id."""

    def __init__(self, actor_id: str) -> None:
        super().__init__(f"no live actor {actor_id!r}")
        self.actor_id = actor_id


class DuplicateActor(ActorError, ValueError):
    """An actor with this id is already registered or supervised."""

    def __init__(self, actor_id: str) -> None:
        super().__init__(f"actor id {actor_id!r} is already taken")
        self.actor_id = actor_id
