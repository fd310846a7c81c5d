"""The PostgreSQL store: the storage port over psycopg 3, one connection, group commit.

Not thread-safe: exactly one thread (the StorageActor's, or the trio thread in inline
mode) calls it, as with the DuckDB store. A batch is planned on the same overlay
(``storage._batch.WriteBatch``) with the same commands (``storage._commands``) and
projections, then written in one PostgreSQL transaction; callers are answered once it
committed. PostgreSQL's write-ahead log is the journal here (``synchronous_commit``
on: a commit returns once its WAL record is flushed), so there is no journal file,
no applier and no catch-up: what is committed is in the tables.

The caches and their read-through SQL are the DuckDB store's (``storage._caches``);
the SQL they issue is portable, with DuckDB's ``?`` placeholders turned into
psycopg's. The queries that use DuckDB's own functions (JSON, lists) and those that
pass a parameter only to test it for null are written again here.

One process per database: the caches assume no other writer, so the store's connection
holds an advisory lock while it is open and a second opener is refused. Leases with fencing
tokens, routing between workers and cross-worker recovery are not built yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import msgspec
import psycopg

from runtime import IdGenerator, SessionMessage, StorageError
from runtime import events as ev
from runtime.history import cut_short
from storage._batch import StoredEvent, WriteBatch
from storage._caches import CACHE_MESSAGES, decode_info, decode_message, input_from_row
from storage._pipeline import Outcome, WritePipeline
from storage._port import AdmitAndOpen, AdmitPrompt, Command, Query, UsageRow
from storage._queries import _USAGE_TYPES, StoreQueries, _stored_from_row
from storage._rows import _SESSION_ROWS, TABLES, RowSet
from storage._telemetry import batch_span, end_batch_span

__all__ = ["PostgresStatistics", "PostgresStore"]

T = TypeVar("T")

_SCHEMA: Final[list[list[str]]] = [
    [
        """create table event (
            id text not null,
            aggregate_id text not null,
            seq bigint not null,
            type text not null,
            version integer not null,
            data text not null,
            primary key (aggregate_id, seq))""",
        """create table session (
            id text primary key,
            project_id text not null,
            directory text not null,
            time_created bigint not null,
            time_updated bigint not null,
            data text not null)""",
        """create table session_input (
            id text primary key,
            session_id text not null,
            prompt text not null,
            delivery text not null,
            admitted_seq bigint not null,
            promoted_seq bigint,
            time_created bigint not null)""",
        "create index session_input_pending on session_input (session_id, admitted_seq) "
        "where promoted_seq is null",
        """create table session_message (
            id text primary key,
            session_id text not null,
            type text not null,
            seq bigint not null,
            time_created bigint not null,
            data text not null)""",
        "create index session_message_by_seq on session_message (session_id, seq)",
        """create table session_context_epoch (
            session_id text primary key,
            baseline text not null,
            snapshot text not null,
            agent text not null,
            baseline_seq bigint not null,
            replacement_seq bigint,
            revision bigint not null)""",
        """create table permission_request (
            id text primary key,
            session_id text not null,
            status text not null,
            time_created bigint not null,
            data text not null)""",
        "create index permission_request_by_session on permission_request (session_id)",
        """create table permission_approval (
            project text not null,
            permission text not null,
            resource text not null,
            time_created bigint not null)""",
    ],
]
SCHEMA_VERSION: Final = len(_SCHEMA)
_SCHEMA_LOCK: Final = 0x4B697474  # an advisory lock key: one opener migrates at a time
_OWNER_LOCK: Final = 0x4B697475
"""A session-level advisory lock the store's connection holds while open: one process per
database until leases exist (its caches assume no other writer)."""


class PostgresStatistics(msgspec.Struct, frozen=True, kw_only=True):
    batches: int
    operations: int
    events: int
    last_batch_size: int
    last_commit_ms: float
    database_bytes: int
    wal_lsn: int
    """The server's current WAL position, in bytes."""


class _Placeholders:
    """The psycopg connection, taking the DuckDB store's ``?`` placeholders (the shared
    read-through SQL in ``storage._caches`` and ``storage._queries``)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> psycopg.Cursor[Any]:
        return self._conn.execute(sql.replace("?", "%s"), params)


class PostgresStore(WritePipeline, StoreQueries):
    """The store on PostgreSQL. Use :meth:`open`; close with :meth:`close`.

    Args:
        url: a libpq connection string or ``postgresql://`` URL.
        directory: the data dir (tool output lives there; the store keeps nothing in it).
        ids: makes the ids of stored events.
        connect_timeout: seconds to wait for the server at open.
        sync_thread: accepted for the StorageActor's threaded mode and ignored: a
            commit returns once it is durable, so there is no separate sync.
    """

    @classmethod
    def open(cls, url: str, *, directory: Path, **options: Any) -> PostgresStore:
        """Connect, bring the schema up to date and take the database's owner lock.

        Raises:
            StorageError: the server cannot be reached, refused the schema, or another
                open store (in any process) holds the database.
        """
        store = cls(url, directory=directory, **options)
        store._open()
        return store

    def __init__(
        self, url: str, *, directory: Path, ids: IdGenerator | None = None,
        connect_timeout: float = 10.0, sync_thread: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(Path(directory), ids=ids)
        self._url = url
        self._connect_timeout = connect_timeout
        self._pg: psycopg.Connection[Any] | None = None

    def _open(self) -> None:
        try:
            self._pg = psycopg.connect(
                self._url, autocommit=True, connect_timeout=max(1, int(self._connect_timeout))
            )
            self._migrate()
            held = self.pg.execute("select pg_try_advisory_lock(%s)", [_OWNER_LOCK]).fetchone()
        except psycopg.Error as exc:
            self.close()
            raise StorageError(f"PostgreSQL store did not open: {exc}") from exc
        if not held or not held[0]:
            self.close()
            raise StorageError(
                "PostgreSQL store did not open: another Kittiwake process uses this database "
                "(one process per database; docs/cluster.md)"
            )
        # The shared read-through SQL only needs ``execute``; see _Placeholders.
        self._conn = cast(Any, _Placeholders(self._pg))
        self._lsn = 0

    def _migrate(self) -> None:
        pg = self.pg
        with pg.transaction():
            pg.execute("select pg_advisory_xact_lock(%s)", [_SCHEMA_LOCK])
            pg.execute(
                "create table if not exists schema_version (version integer primary key, "
                "applied bigint)"
            )
            row = pg.execute("select coalesce(max(version), 0) from schema_version").fetchone()
            found = int(row[0]) if row else 0
            for version in range(found + 1, SCHEMA_VERSION + 1):
                for statement in _SCHEMA[version - 1]:
                    pg.execute(statement)
                pg.execute(
                    "insert into schema_version values (%s, %s)", [version, time.time_ns() // 10**6]
                )

    @property
    def pg(self) -> psycopg.Connection[Any]:
        if self._pg is None:
            raise StorageError("store is closed")
        return self._pg

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        self._conn = None
        if self._pg is not None:
            pg, self._pg = self._pg, None
            pg.close()

    # -- writes -------------------------------------------------------------------------

    def write_batch(
        self,
        operations: Sequence[Command[Any] | Callable[[WriteBatch], Any]],
        *,
        on_durable: Callable[[list[Outcome], list[StoredEvent]], None] | None = None,
        on_written: Callable[[list[Outcome]], None] | None = None,
    ) -> tuple[list[Outcome], list[StoredEvent]]:
        """Run *operations* as one group commit: one PostgreSQL transaction; answer each.

        *on_written* then *on_durable* are called once the transaction committed (a
        commit is durable when it returns). An operation that raises gets that error
        and writes nothing; the others proceed. If the transaction fails, every
        operation gets StorageError and the store is broken (reopen it): nothing of
        the batch was written, so an exact retry is safe.
        """
        if self.broken:
            raise StorageError("the PostgreSQL store failed a commit; reopen it")
        batch = WriteBatch(self)
        self._prefetch([a.message_id for a in map(_admission, operations) if a and not a.fresh])
        outcomes = [self._plan(batch, op) for op in operations]
        self._absent.clear()
        lost = next((o.error for o in outcomes if isinstance(o.error, psycopg.Error)), None)
        if lost is not None:  # a read while planning failed: the connection, not a command
            return self._commit_failed(lost, len(operations), on_durable)
        if batch.events or batch.epochs or batch.approvals:
            started = time.perf_counter()
            span = batch_span(len(operations), len(batch.events))
            try:
                self._write_rows(batch.rows())
            except psycopg.Error as exc:
                end_batch_span(span, started, error=exc)
                return self._commit_failed(exc, len(operations), on_durable)
            self._lsn += 1
            self._adopt(batch, self._lsn)
            self._last_commit_ms = (time.perf_counter() - started) * 1000
            end_batch_span(span, started)
        else:
            self._adopt(batch, self._lsn)
        if on_written is not None:
            on_written(outcomes)
        if on_durable is not None:
            on_durable(outcomes, batch.events)
        self._count(len(operations), len(batch.events))
        return outcomes, batch.events

    def _commit_failed(
        self, exc: BaseException, operations: int,
        on_durable: Callable[[list[Outcome], list[StoredEvent]], None] | None,
    ) -> tuple[list[Outcome], list[StoredEvent]]:  # fmt: skip
        self.broken = True
        error = StorageError(f"PostgreSQL commit failed: {exc}")
        error.__cause__ = exc
        failed = [Outcome(error=error) for _ in range(operations)]
        if on_durable is not None:
            on_durable(failed, [])
        return failed, []

    def answer(self, query: Query[T]) -> T:
        """Answer a query of the port (see ``StoreQueries.answer``).

        Raises StorageError when PostgreSQL fails the read (the store is then broken:
        reopen it), what answering raises otherwise.
        """
        try:
            return super().answer(query)
        except psycopg.Error as exc:
            self.broken = True
            raise StorageError(f"PostgreSQL read failed: {exc}") from exc

    def after_durable(self, callback: Callable[[BaseException | None], None]) -> None:
        """Call *callback* at once: every commit was durable when it returned."""
        callback(None)

    def _write_rows(self, rows: RowSet) -> None:
        pg = self.pg
        with pg.transaction(), pg.cursor() as cur:
            if rows.deleted:
                ids = sorted(rows.deleted)
                for table, column in _SESSION_ROWS:
                    cur.execute(f"delete from {table} where {column} = any(%s)", [ids])
            if rows.events:
                cur.executemany(_insert("event", 6), rows.events)
            for table, columns in TABLES.items():
                if new := list(rows.new[table].values()):
                    cur.executemany(_insert(table, len(columns)), new)
                if changed := list(rows.changed[table].values()):
                    sets = ", ".join(f"{c} = %s" for c in columns[1:])
                    cur.executemany(
                        f"update {table} set {sets} where {columns[0]} = %s",
                        [(*row[1:], row[0]) for row in changed],
                    )
            if rows.approvals:
                cur.executemany(_insert("permission_approval", 4), rows.approvals)
            if rows.epochs:
                cur.execute(
                    "delete from session_context_epoch where session_id = any(%s)",
                    [sorted(rows.epochs)],
                )
                epochs = [row for row in rows.epochs.values() if row is not None]
                if epochs:
                    cur.executemany(_insert("session_context_epoch", 7), epochs)

    def _prefetch(self, message_ids: list[str]) -> None:
        """Look up a batch's message ids in two queries instead of two per operation."""
        wanted = [i for i in message_ids if i not in self._inputs and i not in self._messages]
        if not wanted:
            return
        pg = self.pg
        found: set[str] = set()
        for row in pg.execute(
            "select id, session_id, prompt, delivery, admitted_seq, time_created, promoted_seq "
            "from session_input where id = any(%s)",
            [wanted],
        ).fetchall():
            if row[1] not in self._deleted:
                self._cache(self._inputs, row[0], input_from_row(row), CACHE_MESSAGES)
                found.add(row[0])
        for row in pg.execute(
            "select id, session_id, seq, data from session_message where id = any(%s)", [wanted]
        ).fetchall():
            if row[1] not in self._deleted:
                entry = (str(row[1]), int(row[2]), decode_message(row[3]))
                self._cache(self._messages, row[0], entry, CACHE_MESSAGES)
                found.add(row[0])
        self._absent.update(set(wanted) - found)

    # -- queries written for PostgreSQL ----------------------------------------------------

    def list_sessions(self, *, limit: int, before: str | None) -> list[ev.SessionInfo]:
        rows = self.pg.execute(
            "select data from session where (%s::text is null or id < %s) order by id desc "
            "limit %s",
            [before, before, limit],
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
        out.update(str(sid) for sid, data in rows if cut_short(decode_message(data)))
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

    def statistics(self) -> PostgresStatistics:  # type: ignore[override]
        row = self.pg.execute(
            "select pg_database_size(current_database()), "
            "(pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint"
        ).fetchone()
        assert row is not None
        return PostgresStatistics(
            **self._stats, last_commit_ms=self._last_commit_ms, database_bytes=int(row[0]),
            wal_lsn=int(row[1]),
        )  # fmt: skip

    def checkpoint_and_backup(self) -> int:
        """Backups of a PostgreSQL store are the server's (``pg_basebackup``, WAL
        archiving); answer the WAL position every commit so far is durable in."""
        row = self.pg.execute("select (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint")
        found = row.fetchone()
        return int(found[0]) if found else 0


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


def _insert(table: str, width: int) -> str:
    return f"insert into {table} values ({', '.join(['%s'] * width)})"


def _admission(op: object) -> AdmitPrompt | None:
    if isinstance(op, AdmitAndOpen):
        return op.admit
    return op if isinstance(op, AdmitPrompt) else None
