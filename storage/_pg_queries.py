"""The PostgreSQL store's queries that DuckDB's SQL does not carry over: JSON operators,
arrays, and parameters tested for null need a type here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import psycopg

from runtime import SessionMessage, StorageError
from runtime import events as ev
from runtime.history import needs_recovery
from storage._batch import StoredEvent
from storage._caches import decode_info, decode_message
from storage._queries import _USAGE_TYPES, StoreQueries, _stored_from_row
from storage._records import RecordRow, UsageRow

__all__ = ["PostgresQueries"]


class PostgresQueries(StoreQueries):
    """The reads of :class:`storage.PostgresStore` written for PostgreSQL."""

    _pg: psycopg.Connection[Any] | None = None
    """The store's connection, while it is open."""

    @property
    def pg(self) -> psycopg.Connection[Any]:
        """The open connection; raises StorageError once the store is closed."""
        if self._pg is None:
            raise StorageError("store is closed")
        return self._pg

    def list_sessions(
        self, *, limit: int, before: str | None, project_id: str | None = None
    ) -> list[ev.SessionInfo]:
        rows = self.pg.execute(
            "select data from session where (%s::text is null or id < %s) "
            "and (%s::text is null or project_id = %s) order by id desc limit %s",
            [before, before, project_id, project_id, limit],
        ).fetchall()
        return [decode_info(r[0]) for r in rows]

    def children(self, session_id: str) -> list[ev.SessionInfo]:
        rows = self.pg.execute(
            "select data from session where data::jsonb ->> 'parentID' = %s order by id",
            [session_id],
        ).fetchall()
        return [decode_info(r[0]) for r in rows]

    def sessions_needing_resume(self) -> list[str]:
        pg = self.pg
        marked = pg.execute(
            "select id from session where data::jsonb ->> 'needsResume' = 'true'"
        ).fetchall()
        rows = pg.execute(
            "select distinct on (session_id) session_id, data from session_message "
            "where type in ('user', 'assistant', 'synthetic') order by session_id, seq desc"
        ).fetchall()
        out = {str(r[0]) for r in marked}
        out.update(str(sid) for sid, data in rows if needs_recovery(decode_message(data)))
        return sorted(out)

    def messages(
        self, session_id: str, *, limit: int, order: str, after_seq: int | None = None,
        before_seq: int | None = None,
    ) -> list[tuple[int, SessionMessage]]:  # fmt: skip
        direction = "desc" if order == "desc" else "asc"
        rows = self.pg.execute(
            "select seq, data from session_message where session_id = %s "
            "and (%s::bigint is null or seq > %s) and (%s::bigint is null or seq < %s) "
            f"order by seq {direction} limit %s",
            [session_id, after_seq, after_seq, before_seq, before_seq, limit],
        ).fetchall()
        return [(int(r[0]), decode_message(r[1])) for r in rows]

    def record(self, kind: str, record_id: str) -> RecordRow | None:
        row = self.pg.execute(
            "select kind, id, time_created, data from record where kind = %s and id = %s",
            [kind, record_id],
        ).fetchone()
        return RecordRow(str(row[0]), str(row[1]), int(row[2]), str(row[3])) if row else None

    def records(self, kind: str, *, limit: int, before: int | None) -> list[RecordRow]:
        rows = self.pg.execute(
            "select kind, id, time_created, data from record where kind = %s "
            "and (%s::bigint is null or time_created < %s) "
            "order by time_created desc, id desc limit %s",
            [kind, before, before, limit],
        ).fetchall()
        return [RecordRow(str(r[0]), str(r[1]), int(r[2]), str(r[3])) for r in rows]

    def events_of_type(
        self, types: list[str], *, session_id: str | None, limit: int
    ) -> list[StoredEvent]:
        rows = self.pg.execute(
            "select * from (select id, aggregate_id, seq, type, version, data from event "
            "where left(type, length(type) - length(version::text) - 1) = any(%s) "
            "and (%s::text is null or aggregate_id = %s) "
            "order by aggregate_id desc, seq desc limit %s) t order by aggregate_id, seq",
            [types, session_id, session_id, limit],
        ).fetchall()
        return [_stored_from_row(r) for r in rows]

    def all_events(self) -> Iterator[StoredEvent]:
        with self.pg.cursor(name="all_events") as cursor, self.pg.transaction():
            cursor.execute(
                "select id, aggregate_id, seq, type, version, data from event "
                "order by aggregate_id, seq"
            )
            while rows := cursor.fetchmany(1000):
                yield from (_stored_from_row(r) for r in rows)

    def usage(self, by: str, *, since_ms: int | None) -> list[UsageRow]:
        key = {
            "model": "m.model", "session": "s.session_id",
            "day": "to_char(to_timestamp(s.ts / 1000.0) at time zone 'UTC', 'YYYY-MM-DD')",
        }[by]  # fmt: skip
        t = _USAGE_TYPES
        rows = self.pg.execute(
            _PG_USAGE.format(key=key),
            [list(t.values()), t["started"], t["started"], since_ms or 0, t["ended"], t["failed"]],
        ).fetchall()
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


_PG_USAGE: Final = """
with steps as (
    select aggregate_id as session_id, type, data::jsonb as j,
        (data::jsonb ->> 'timestamp')::bigint as ts
    from event where type = any(%s)
), models as (
    select session_id, j ->> 'assistantMessageID' as mid, max(j -> 'model' ->> 'id') as model
    from steps where type = %s group by 1, 2
), keyed as (
    select {key} as key, s.type, s.j from steps s
    left join models m on m.session_id = s.session_id and m.mid = s.j ->> 'assistantMessageID'
    where s.type <> %s and s.ts >= %s
), ended as (
    select key, type, j, type = %s as ok from keyed
)
select key,
    count(*) filter (where ok or type = %s),
    coalesce(sum((j -> 'tokens' ->> 'input')::bigint) filter (where ok), 0),
    coalesce(sum((j -> 'tokens' ->> 'output')::bigint) filter (where ok), 0),
    coalesce(sum((j -> 'tokens' -> 'cache' ->> 'read')::bigint) filter (where ok), 0),
    coalesce(sum((j ->> 'cost')::float8) filter (where ok), 0),
    count(*) filter (where not ok)
from ended group by key order by key nulls last
"""
"""``Usage`` (``storage._queries._USAGE``) in PostgreSQL's JSON operators."""
