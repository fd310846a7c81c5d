"""The PostgreSQL store's tables: the schema and its migrations, and how a batch's rows
are written (``storage._postgres``)."""

from __future__ import annotations

import time
from typing import Any, Final

import psycopg

from storage._leases import LEASE_PARKED_SCHEMA, LEASE_SCHEMA
from storage._rows import _SESSION_ROWS, TABLES, RowSet

__all__ = ["SCHEMA_VERSION", "STALE", "expect_versions", "migrate", "write_rows"]

STALE: Final = "KW001"
"""The SQLSTATE ``kittiwake_expect`` fails a statement with: the batch was planned on
state another worker has changed since."""

_EXPECT_SCHEMA: Final = [
    """create function kittiwake_expect(ok boolean) returns boolean language plpgsql as $$
    begin
        if not ok then
            raise exception 'a batch was planned on state another worker changed'
                using errcode = 'KW001';
        end if;
        return true;
    end $$""",
]
"""Schema version 4: the check a batch planned without locking first sends before its
writes (``expect_versions``, ``storage._leases.pg_expect_leases``)."""

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
    LEASE_SCHEMA,
    LEASE_PARKED_SCHEMA,
    _EXPECT_SCHEMA,
    [
        """create table record (
            kind text not null,
            id text not null,
            time_created bigint not null,
            data text not null,
            primary key (kind, id))""",
        "create index record_by_time on record (kind, time_created)",
    ],
]
SCHEMA_VERSION: Final = len(_SCHEMA)
_SCHEMA_LOCK: Final = 0x4B697474  # an advisory lock key: one opener migrates at a time


def migrate(pg: psycopg.Connection[Any]) -> None:
    """Bring the schema to :data:`SCHEMA_VERSION` in one transaction, under an advisory
    lock (one opener migrates at a time). Raises psycopg.Error."""
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


def expect_versions(pg: psycopg.Connection[Any], versions: dict[str, int]) -> None:
    """Send, in the open transaction, the check that each session still has the version
    in *versions*: it locks their rows (in id order) until the transaction ends, or fails
    with :data:`STALE` (and the transaction with it)."""
    ids = sorted(versions)
    pg.execute(
        "select kittiwake_expect(count(*) = %s) from (select 1 from session s "
        "join unnest(%s::text[], %s::bigint[]) e(id, version) "
        "on s.id = e.id and s.version = e.version order by s.id for update of s) locked",
        [len(ids), ids, [versions[i] for i in ids]],
    )


def write_rows(pg: psycopg.Connection[Any], rows: RowSet) -> None:
    """Write a batch's rows in the open transaction (statements only sent, in pipeline
    mode)."""
    with pg.cursor() as cur:
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
        if records := list(rows.records.values()):
            cur.executemany(
                _insert("record", 4) + " on conflict (kind, id) do update set "
                "time_created = excluded.time_created, data = excluded.data",
                records,
            )
        if rows.epochs:
            cur.execute(
                "delete from session_context_epoch where session_id = any(%s)",
                [sorted(rows.epochs)],
            )
            epochs = [row for row in rows.epochs.values() if row is not None]
            if epochs:
                cur.executemany(_insert("session_context_epoch", 7), epochs)


def _insert(table: str, width: int) -> str:
    return f"insert into {table} values ({', '.join(['%s'] * width)})"
