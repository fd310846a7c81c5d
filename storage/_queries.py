"""The DuckDB store's queries: the SQL reads, and how each query of the port is answered."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from typing import Any, Final, TypeVar

import msgspec

from runtime import SessionMessage
from runtime import events as ev
from runtime.history import needs_recovery
from storage import _port as p
from storage._batch import StoredEvent
from storage._caches import StoreCaches, decode_info, decode_message, decode_permission
from storage._pipeline import Outcome
from storage._records import Backup, GetRecord, ListRecords, RecordRow, Statistics, Usage, UsageRow
from storage._state import DB_FILE

__all__ = ["StoreQueries", "StoreStatistics", "decode_stored"]

T = TypeVar("T")


_FOOTPRINT: Final = {
    "events": ("event", "aggregate_id"),
    "session": ("session", "id"),
    "inputs": ("session_input", "session_id"),
    "messages": ("session_message", "session_id"),
    "permissions": ("permission_request", "session_id"),
    "epoch": ("session_context_epoch", "session_id"),
}
"""The tables holding a session's records, by kind, and the column naming the session."""


class StoreStatistics(msgspec.Struct, frozen=True, kw_only=True):
    batches: int
    operations: int
    events: int
    last_batch_size: int
    last_commit_ms: float
    file_bytes: int
    journal_lsn: int
    recovered_batches: int
    rebuilt: bool
    journal_batches: int
    """Batches the journal holds: those since the last verified backup."""
    journal_bytes: int
    backups: int
    """Verified backups this store took since it opened."""
    last_backup_seconds: float


class StoreQueries(StoreCaches):
    """The reads of :class:`EventStore` that query DuckDB (after the read barrier)."""

    def answer(self, query: p.Query[T]) -> T:
        """Answer a query of the port (``storage._port``), from the caches first.

        Raises what the read raises; TypeError for an unknown query.
        """
        try:
            handler = _HANDLERS[type(query)]
        except KeyError:
            raise TypeError(f"not a storage query: {query!r}") from None
        result: T = handler(self, query)
        return result

    def answer_many(self, queries: Sequence[p.Query[Any]]) -> list[Outcome]:
        """Answer a batch's reads in order (``answer``), each with its value or the error
        answering it raised."""
        outcomes: list[Outcome] = []
        for query in queries:
            try:
                outcomes.append(Outcome(value=self.answer(query)))
            except Exception as exc:  # noqa: BLE001 - the error is the caller's answer
                outcomes.append(Outcome(error=exc))
        return outcomes

    def permissions(self, session_id: str) -> list[ev.PermissionInfo]:
        """A session's permission requests, oldest first."""
        rows = (
            self._db()
            .execute(
                "select data from permission_request where session_id = ? order by time_created, id",
                [session_id],
            )
            .fetchall()
        )
        return [decode_permission(r[0]) for r in rows]

    def record(self, kind: str, record_id: str) -> RecordRow | None:
        """The record *record_id* of *kind* (``storage._records``), or None."""
        row = (
            self._db()
            .execute(
                "select kind, id, time_created, data from record where kind = ? and id = ?",
                [kind, record_id],
            )
            .fetchone()
        )
        return RecordRow(str(row[0]), str(row[1]), int(row[2]), str(row[3])) if row else None

    def records(self, kind: str, *, limit: int, before: int | None) -> list[RecordRow]:
        """Records of *kind*, newest first, *limit* at most, created before *before*."""
        rows = (
            self._db()
            .execute(
                "select kind, id, time_created, data from record where kind = ? "
                "and (? is null or time_created < ?) order by time_created desc, id desc limit ?",
                [kind, before, before, limit],
            )
            .fetchall()
        )
        return [RecordRow(str(r[0]), str(r[1]), int(r[2]), str(r[3])) for r in rows]

    def lease_of(self, session_id: str) -> p.Lease | None:
        """The session's live lease (held or parked, unexpired), or None."""
        return self._leases.live(session_id)

    def orphans(self, limit: int) -> list[str]:
        """Sessions with unpromoted input and no lease driving them (none live, or a
        parked one), or whose lease expired unreleased and unparked; at most *limit*, by
        id."""
        pending = [s for s in self.session_ids_with_pending() if _undriven(self._leases.live(s))]
        expired = [s for s in self._leases.expired() if self.session_row(s) is not None]
        return sorted({*pending, *expired})[:limit]

    def get_session(self, session_id: str) -> ev.SessionInfo | None:
        row = self.session_row(session_id)
        return row.info if row else None

    def last_seq(self, session_id: str) -> int:
        row = self.session_row(session_id)
        return row.last_seq if row else -1

    def list_sessions(
        self, *, limit: int, before: str | None, project_id: str | None = None
    ) -> list[ev.SessionInfo]:
        """Sessions newest first (ids ascend with time), *limit* at most, ids below *before*,
        of *project_id* only when given."""
        rows = (
            self._db()
            .execute(
                "select data from session where (? is null or id < ?) "
                "and (? is null or project_id = ?) order by id desc limit ?",
                [before, before, project_id, project_id, limit],
            )
            .fetchall()
        )
        return [decode_info(r[0]) for r in rows]

    def children(self, session_id: str) -> list[ev.SessionInfo]:
        """The sessions created with *session_id* as their parent, oldest first."""
        rows = (
            self._db()
            .execute(
                "select data from session where json_extract_string(data, '$.parentID') = ? "
                "order by id",
                [session_id],
            )
            .fetchall()
        )
        return [decode_info(r[0]) for r in rows]

    def session_ids_with_pending(self) -> list[str]:
        rows = (
            self._db()
            .execute(
                "select distinct session_id from session_input where promoted_seq is null "
                "order by session_id"
            )
            .fetchall()
        )
        return [str(r[0]) for r in rows]

    def sessions_needing_resume(self) -> list[str]:
        """Sessions marked as needing a resume (``needsResume``), and those whose latest
        conversational message (user, assistant, synthetic) shows work cut short, or a
        tool call left without a result, not yet recovered
        (``runtime._recovery.needs_recovery``); system and switch messages don't count."""
        db = self._db()
        marked = db.execute(
            "select id from session where json_extract_string(data, '$.needsResume') = 'true'"
        ).fetchall()
        rows = db.execute(
            "select m.session_id, m.data from session_message m join "
            "(select session_id, max(seq) as s from session_message "
            "where type in ('user', 'assistant', 'synthetic') group by session_id) x "
            "on m.session_id = x.session_id and m.seq = x.s"
        ).fetchall()
        out = {str(r[0]) for r in marked}
        out.update(str(sid) for sid, data in rows if needs_recovery(decode_message(data)))
        return sorted(out)

    def messages(
        self, session_id: str, *, limit: int, order: str, after_seq: int | None = None,
        before_seq: int | None = None,
    ) -> list[tuple[int, SessionMessage]]:  # fmt: skip
        """A page of projected messages by creating-event seq: from the session's cached
        history when it is held (it has every message, those not yet applied too, so the
        page needs no read barrier), else from DuckDB."""
        direction = "desc" if order == "desc" else "asc"
        cached = self._histories.get(session_id)
        if cached is not None:
            rows = cached.listing(0 if after_seq is None else after_seq + 1)
            if before_seq is not None:
                rows = rows[: bisect.bisect_left(rows, before_seq, key=itemgetter(0))]
            if direction == "desc":
                rows.reverse()
            return rows[:limit]
        found = (
            self._db()
            .execute(
                "select seq, data from session_message where session_id = ? "
                "and (? is null or seq > ?) and (? is null or seq < ?) "
                f"order by seq {direction} limit ?",
                [session_id, after_seq, after_seq, before_seq, before_seq, limit],
            )
            .fetchall()
        )
        return [(int(r[0]), decode_message(r[1])) for r in found]

    def events(self, session_id: str, *, after: int, limit: int) -> list[StoredEvent]:
        """Durable events with seq > *after*, ascending, *limit* at most."""
        rows = (
            self._db()
            .execute(
                "select id, aggregate_id, seq, type, version, data from event "
                "where aggregate_id = ? and seq > ? order by seq limit ?",
                [session_id, after, limit],
            )
            .fetchall()
        )
        return [_stored_from_row(r) for r in rows]

    def events_of_type(
        self, types: list[str], *, session_id: str | None, limit: int
    ) -> list[StoredEvent]:
        """The last *limit* durable events whose bare type is in *types* (one session's,
        or every session's), in (session, seq) order."""
        rows = (
            self._db()
            .execute(
                "select * from (select id, aggregate_id, seq, type, version, data from event "
                "where list_contains(?, left(type, length(type) - length(cast(version as "
                "varchar)) - 1)) and (? is null or aggregate_id = ?) "
                "order by aggregate_id desc, seq desc limit ?) order by aggregate_id, seq",
                [types, session_id, session_id, limit],
            )
            .fetchall()
        )
        return [_stored_from_row(r) for r in rows]

    def all_events(self) -> Iterator[StoredEvent]:
        """Every durable event in (aggregate, seq) order; used to rebuild projections."""
        cursor = self._db().execute(
            "select id, aggregate_id, seq, type, version, data from event "
            "order by aggregate_id, seq"
        )
        while rows := cursor.fetchmany(1000):
            yield from (_stored_from_row(r) for r in rows)

    def footprint(self, session_id: str) -> dict[str, int]:
        """Rows per kind of record the session holds in DuckDB (all 0 once deleted)."""
        db = self._db()
        counts = {}
        for kind, (table, column) in _FOOTPRINT.items():
            row = db.execute(
                f"select count(*) from {table} where {column} = ?", [session_id]
            ).fetchone()
            counts[kind] = int(row[0]) if row else 0
        return counts

    def usage(self, by: str, *, since_ms: int | None) -> list[UsageRow]:
        """Answer ``Usage`` in SQL over the event table (see its docstring)."""
        key = {
            "model": "m.model", "session": "s.session_id",
            "day": "strftime(make_timestamp(s.ts * 1000), '%Y-%m-%d')",
        }[by]  # fmt: skip
        params = {"since": since_ms or 0, **_USAGE_TYPES}
        rows = self._db().execute(_USAGE.format(key=key), params).fetchall()
        return [
            UsageRow(
                key=r[0],
                turns=int(r[1]),
                tokens_in=int(r[2]),
                tokens_out=int(r[3]),
                tokens_cached=int(r[4]),
                cost=round(float(r[5]), 6),
                errors=int(r[6]),
            )  # fmt: skip
            for r in rows
        ]

    def statistics(self) -> StoreStatistics:
        path = self.directory / DB_FILE
        return StoreStatistics(
            **self._stats,
            last_commit_ms=self._last_commit_ms,
            file_bytes=path.stat().st_size if path.exists() else 0,
            journal_lsn=self._lsn,
            recovered_batches=self._recovered,
            rebuilt=self._rebuilt,
            journal_batches=self._journal.held_records if self._journal else 0,
            journal_bytes=self._journal.held_bytes if self._journal else 0,
            backups=self._backups,
            last_backup_seconds=self._last_backup_seconds,
        )


def _undriven(lease: p.Lease | None) -> bool:
    return lease is None or lease.parked


def _stored_from_row(row: Sequence[Any]) -> StoredEvent:
    # The type column holds "<type>.<version>" (see WriteBatch.statements); StoredEvent.type
    # is the bare type, so events read back replay (rebuild_from) into identical rows.
    return StoredEvent(
        id=row[0], aggregate_id=row[1], seq=int(row[2]),
        type=row[3].removesuffix(f".{int(row[4])}"), version=int(row[4]), data=row[5].encode(),
    )  # fmt: skip


def decode_stored(stored: StoredEvent) -> ev.DurableEvent:
    """Decode a stored event's data into its Struct."""
    return ev.decode_event(stored.data)


_USAGE: Final = """
with steps as (
    select aggregate_id as session_id, type, data,
        json_extract_string(data, '$.assistantMessageID') as mid,
        cast(json_extract(data, '$.timestamp') as bigint) as ts
    from event
    where type in ($started, $ended,
                   $failed, $tool_failed)
), models as (
    select session_id, mid, max(json_extract_string(data, '$.model.id')) as model
    from steps where type = $started group by session_id, mid
), keyed as (
    select {key} as key, s.type, s.data from steps s
    left join models m on m.session_id = s.session_id and m.mid = s.mid
    where s.type <> $started and s.ts >= $since
), ended as (
    select key, type, data, type = $ended as ok from keyed
)
select key,
    count(*) filter (where ok or type = $failed),
    coalesce(sum(cast(json_extract(data, '$.tokens.input') as bigint)) filter (where ok), 0),
    coalesce(sum(cast(json_extract(data, '$.tokens.output') as bigint)) filter (where ok), 0),
    coalesce(sum(cast(json_extract(data, '$.tokens.cache.read') as bigint)) filter (where ok), 0),
    coalesce(sum(cast(json_extract(data, '$.cost') as double)) filter (where ok), 0),
    count(*) filter (where not ok)
from ended group by key order by key nulls last
"""
"""``Usage`` in SQL: ``{key}`` is the grouping expression over ``steps s`` and ``models m``."""


_USAGE_TYPES: Final = {
    name: f"{kind.__struct_config__.tag}.{kind.VERSION}"
    for name, kind in (
        ("started", ev.StepStarted), ("ended", ev.StepEnded), ("failed", ev.StepFailed),
        ("tool_failed", ev.ToolFailed),
    )
}  # fmt: skip

_HANDLERS: Final[dict[type[Any], Callable[[Any, Any], Any]]] = {
    p.GetSession: lambda s, q: s.get_session(q.session_id),
    p.ListSessions: lambda s, q: s.list_sessions(
        limit=q.limit, before=q.before, project_id=q.project_id
    ),
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
    p.EventsOfType: lambda s, q: s.events_of_type(q.types, session_id=q.session_id, limit=q.limit),
    p.AllEvents: lambda s, q: list(s.all_events()),
    p.Permission: lambda s, q: s.permission(q.request_id),
    p.Permissions: lambda s, q: s.permissions(q.session_id),
    p.IsApproved: lambda s, q: s.is_approved(q.project, q.permission, q.resource),
    p.PendingInputs: lambda s, q: s.pending_inputs(q.session_id),
    p.AdmittedInput: lambda s, q: s.input(q.message_id),
    p.SessionsWithPending: lambda s, q: s.session_ids_with_pending(),
    p.SessionsNeedingResume: lambda s, q: s.sessions_needing_resume(),
    p.Footprint: lambda s, q: s.footprint(q.session_id),
    Usage: lambda s, q: s.usage(q.by, since_ms=q.since_ms),
    p.LeaseOf: lambda s, q: s.lease_of(q.session_id),
    p.Orphans: lambda s, q: s.orphans(q.limit),
    Statistics: lambda s, q: s.statistics(),
    Backup: lambda s, q: s.checkpoint_and_backup(),
    GetRecord: lambda s, q: s.record(q.kind, q.id),
    ListRecords: lambda s, q: s.records(q.kind, limit=q.limit, before=q.before),
}
