"""How the DuckDB store answers each query of the port."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from storage import _port as p

if TYPE_CHECKING:
    from storage._store import EventStore

__all__ = ["answer"]


def answer(store: EventStore, query: p.Query[Any]) -> Any:
    """Answer *query* from *store* (its caches first). Raises what the read raises,
    TypeError for an unknown query."""
    try:
        handler = _HANDLERS[type(query)]
    except KeyError:
        raise TypeError(f"not a storage query: {query!r}") from None
    return handler(store, query)


_HANDLERS: Final[dict[type[Any], Callable[[EventStore, Any], Any]]] = {
    p.GetSession: lambda s, q: s.get_session(q.session_id),
    p.ListSessions: lambda s, q: s.list_sessions(limit=q.limit, before=q.before),
    p.Children: lambda s, q: s.children(q.session_id),
    p.SessionHistory: lambda s, q: (s.get_session(q.session_id), s.history(q.session_id)),
    p.ContextView: lambda s, q: (s.history(q.session_id), s.epoch(q.session_id)),
    p.History: lambda s, q: s.history(q.session_id, from_seq=q.from_seq),
    p.HistoryChanges: lambda s, q: s.history_delta(q.session_id, q.generation, q.version),
    p.Messages: lambda s, q: s.messages(
        q.session_id, limit=q.limit, order=q.order, after_seq=q.after_seq, before_seq=q.before_seq
    ),
    p.MessageEntry: lambda s, q: s.message_entry(q.message_id),
    p.Epoch: lambda s, q: s.epoch(q.session_id),
    p.Events: lambda s, q: s.events(q.session_id, after=q.after, limit=q.limit),
    p.EventsTail: lambda s, q: (
        s.events(q.session_id, after=q.after, limit=q.limit),
        s.get_session(q.session_id) is None,
    ),
    p.AllEvents: lambda s, q: list(s.all_events()),
    p.Permission: lambda s, q: s.permission(q.request_id),
    p.Permissions: lambda s, q: s.permissions(q.session_id),
    p.IsApproved: lambda s, q: s.is_approved(q.project, q.permission, q.resource),
    p.PendingInputs: lambda s, q: s.pending_inputs(q.session_id),
    p.SessionsWithPending: lambda s, q: s.session_ids_with_pending(),
    p.SessionsNeedingResume: lambda s, q: s.sessions_needing_resume(),
    p.Footprint: lambda s, q: s.footprint(q.session_id),
    p.Statistics: lambda s, q: s.statistics(),
    p.Backup: lambda s, q: s.checkpoint_and_backup(),
}
