"""Exporting a session as its stored durable events, with those of its subsessions, and
importing such an export into another store whole.

The events go as stored (session, seq, type, version and their JSON's bytes), so an
import holds the same history as the store the export came from; only the stored events'
own ids are new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from runtime import InvalidInputError, SessionInfo
from storage import Children, Events, ImportSessions, StoredEvent

if TYPE_CHECKING:
    from actors._runtime import Runtime

__all__ = ["DEFAULT_MAX_EXPORT_EVENTS", "export_events", "import_events"]

DEFAULT_MAX_EXPORT_EVENTS: Final = 200_000
"""Most durable events one export holds (its session and subsessions together)."""
_PAGE: Final = 1000


async def export_events(
    rt: Runtime, session_id: str, *, max_events: int = DEFAULT_MAX_EXPORT_EVENTS
) -> list[StoredEvent]:
    """Every durable event of *session_id*, then of its subsessions (a task's, and theirs,
    breadth first), each session's in seq order from its ``session.created``.

    Raises ``SessionNotFoundError``; ``InvalidInputError`` when they are more than
    *max_events*. Reads only: cancellation leaves everything as it was.
    """
    await rt.sessions.get(session_id)
    order = [session_id]
    at = 0
    while at < len(order):
        order += [child.id for child in await rt.storage.read(Children(session_id=order[at]))]
        at += 1
    events: list[StoredEvent] = []
    for sid in order:
        cursor = -1
        while True:
            page = await rt.storage.read(Events(session_id=sid, after=cursor, limit=_PAGE))
            events += page
            if len(events) > max_events:
                raise InvalidInputError(
                    f"{session_id} and its subsessions hold more than {max_events} events"
                )
            if len(page) < _PAGE:
                break
            cursor = page[-1].seq
    return events


async def import_events(rt: Runtime, events: list[StoredEvent]) -> list[SessionInfo]:
    """Store an export's *events* (``export_events``'s, from any store) in one batch, so
    its sessions exist whole or not at all; their infos, the exported session first.

    Raises ``PromptConflictError`` when one of the sessions exists here, and
    ``InvalidInputError`` for an event that is not its type's JSON or does not follow its
    session's previous one; nothing is written then. Cancellation before the write is
    acknowledged leaves them imported or not, never in part.
    """
    if not events:
        raise InvalidInputError("the export holds no events")
    return await rt.storage.write(ImportSessions(events=events))
