"""Durable records beside the sessions: what the gateway keeps of its own (bearer tokens,
the audit trail, projects), one upserted row per ``(kind, id)``.

A record is written in a group commit like any command (journaled with its batch in
DuckDB, in the batch's transaction in PostgreSQL) and read back from the database, never
from a cache: every cluster worker reads what any of them wrote.
"""

from __future__ import annotations

import msgspec

from storage._port import Command, Query

__all__ = ["GetRecord", "ListRecords", "PutRecord", "RecordRow"]


class RecordRow(msgspec.Struct, frozen=True, array_like=True):
    """One ``record`` row: *data* is the record's JSON, written whole each time."""

    kind: str
    id: str
    time_created: int
    data: str


class PutRecord(Command[None], frozen=True, tag="record.put"):
    """Write *row*, replacing the record of the same ``(kind, id)`` if there is one."""

    row: RecordRow


class GetRecord(Query[RecordRow | None], frozen=True, tag="record.get"):
    """The record *id* of *kind*, or None."""

    kind: str
    id: str


class ListRecords(Query[list[RecordRow]], frozen=True, tag="record.list"):
    """Records of *kind*, newest first (by ``time_created``, then id), *limit* at most,
    created before *before* (milliseconds) when given."""

    kind: str
    limit: int
    before: int | None = None
