"""The database schema, as forward migrations applied in order at open."""

from __future__ import annotations

from typing import Final

import duckdb

__all__ = ["SCHEMA_VERSION", "migrate"]

_MIGRATIONS: Final[list[list[str]]] = [
    [
        """create table event (
            id varchar not null,
            aggregate_id varchar not null,
            seq bigint not null,
            type varchar not null,
            version integer not null,
            data varchar not null,
            primary key (aggregate_id, seq))""",
        """create table session (
            id varchar primary key,
            project_id varchar not null,
            directory varchar not null,
            time_created bigint not null,
            time_updated bigint not null,
            data varchar not null)""",
        """create table session_input (
            id varchar primary key,
            session_id varchar not null,
            prompt varchar not null,
            delivery varchar not null,
            admitted_seq bigint not null,
            promoted_seq bigint,
            time_created bigint not null)""",
        """create table session_message (
            id varchar primary key,
            session_id varchar not null,
            type varchar not null,
            seq bigint not null,
            time_created bigint not null,
            data varchar not null)""",
        """create table session_context_epoch (
            session_id varchar primary key,
            baseline varchar not null,
            snapshot varchar not null,
            agent varchar not null,
            baseline_seq bigint not null,
            replacement_seq bigint,
            revision bigint not null)""",
        "create table meta (key varchar primary key, value bigint not null)",
        "insert into meta values ('journal_lsn', -1)",
    ],
]

_MIGRATIONS.append(
    [
        """create table permission_request (
            id varchar primary key,
            session_id varchar not null,
            status varchar not null,
            time_created bigint not null,
            data varchar not null)""",
        """create table permission_approval (
            project varchar not null,
            permission varchar not null,
            resource varchar not null,
            time_created bigint not null)""",
    ]
)

_MIGRATIONS.append(
    [
        """create table record (
            kind varchar not null,
            id varchar not null,
            time_created bigint not null,
            data varchar not null,
            primary key (kind, id))""",
    ]
)

SCHEMA_VERSION: Final = len(_MIGRATIONS)


def migrate(conn: duckdb.DuckDBPyConnection, *, now_ms: int) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; return the version found before (0 for
    a new database).

    Every pending migration runs in one transaction with its version rows, so a crash
    leaves the database at the version found or at the latest, never between.
    """
    conn.execute("begin")
    try:
        conn.execute(
            "create table if not exists schema_version (version integer primary key, "
            "applied bigint)"
        )
        row = conn.execute("select coalesce(max(version), 0) from schema_version").fetchone()
        found = int(row[0]) if row else 0
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in _MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute("insert into schema_version values (?, ?)", [version, now_ms])
        conn.execute("commit")
    except BaseException:
        conn.execute("rollback")
        raise
    return found
