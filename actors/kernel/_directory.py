"""The directory of live actors and the supervision tree the inspector draws."""

from __future__ import annotations

from typing import Any

import msgspec

from actors.kernel._actor import Actor, ActorStatistics
from actors.kernel._errors import ActorNotFound, DuplicateActor

__all__ = ["ActorDirectory", "ActorTreeNode"]


class ActorTreeNode(msgspec.Struct, frozen=True, kw_only=True):
    """One actor in the supervision tree, with the actors it supervises."""

    statistics: ActorStatistics
    children: tuple[ActorTreeNode, ...] = ()


class ActorDirectory:
    """Maps actor ids to live actors and remembers who supervises whom.

    Supervisors given a directory register each child while it is supervised; whoever
    starts the root registers it with no parent.
    """

    def __init__(self) -> None:
        self._actors: dict[str, Actor[Any]] = {}
        self._parents: dict[str, str | None] = {}

    def register(self, actor: Actor[Any], *, parent: str | None = None) -> None:
        """Add *actor*, supervised by the actor with id *parent* (``None`` for a root).

        Raises:
            DuplicateActor: another live actor has its id.
        """
        if actor.id in self._actors:
            raise DuplicateActor(actor.id)
        self._actors[actor.id] = actor
        self._parents[actor.id] = parent

    def unregister(self, actor_id: str) -> None:
        """Remove an actor; removing an unknown id does nothing."""
        self._actors.pop(actor_id, None)
        self._parents.pop(actor_id, None)

    def lookup(self, actor_id: str) -> Actor[Any]:
        """Return the live actor with this id.

        Raises:
            ActorNotFound: none is registered.
        """
        try:
            return self._actors[actor_id]
        except KeyError:
            raise ActorNotFound(actor_id) from None

    def get(self, actor_id: str) -> Actor[Any] | None:
        """Return the live actor with this id, or ``None``."""
        return self._actors.get(actor_id)

    def actors(self) -> tuple[Actor[Any], ...]:
        """Every live actor, in registration order."""
        return tuple(self._actors.values())

    def statistics(self) -> tuple[ActorStatistics, ...]:
        """Every live actor's statistics, for the inspector's table."""
        return tuple(actor.statistics() for actor in self._actors.values())

    def tree(self) -> tuple[ActorTreeNode, ...]:
        """The supervision forest: roots are actors whose parent is not registered."""
        children: dict[str | None, list[str]] = {}
        for actor_id, parent in self._parents.items():
            key = parent if parent in self._actors else None
            children.setdefault(key, []).append(actor_id)
        return self._nodes(None, children)

    def __contains__(self, actor_id: object) -> bool:
        return actor_id in self._actors

    def __len__(self) -> int:
        return len(self._actors)

    def _nodes(
        self, parent: str | None, children: dict[str | None, list[str]]
    ) -> tuple[ActorTreeNode, ...]:
        return tuple(
            ActorTreeNode(
                statistics=self._actors[actor_id].statistics(),
                children=self._nodes(actor_id, children),
            )
            for actor_id in children.get(parent, ())
        )
