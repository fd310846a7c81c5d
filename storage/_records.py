"""Beside the sessions: the durable records the gateway keeps of its own (bearer tokens,
the audit trail, projects, sign-ins), one upserted row per ``(kind, id)``, and what the
operator asks of the store (usage, statistics, a backup).

A record is written in a group commit like any command (journaled with its batch in
DuckDB, in the batch's transaction in PostgreSQL) and read back from the database, never
from a cache: every cluster worker reads what any of them wrote.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from storage._port import Command, Query

__all__ = [
    "Backup",
    "GetRecord",
    "ListRecords",
    "PutRecord",
    "RecordRow",
    "Statistics",
    "Usage",
    "UsageRow",
]


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


class UsageRow(msgspec.Struct, frozen=True, kw_only=True):
    """One row of ``Usage``: the provider turns that ended or failed, their tokens and
    cost, and the failures (failed turns and tool calls) of one model, session or day."""

    key: str | None
    turns: int
    tokens_in: int
    tokens_out: int
    tokens_cached: int
    cost: float
    errors: int


class Usage(Query[list[UsageRow]], frozen=True, tag="usage.summary"):
    """Turns, tokens, cost and failures from the durable events (``step.ended``,
    ``step.failed``, ``tool.failed``) per model (of the step's ``step.started``), session
    or UTC day, of events stamped at or after *since_ms*; ordered by key, None last."""

    by: Literal["model", "session", "day"]
    since_ms: int | None = None


class Statistics(Query[Any], frozen=True, tag="store.statistics"):
    """The implementation's statistics (a msgspec Struct)."""


class Backup(Query[int], frozen=True, tag="store.backup"):
    """Checkpoint and write a verified backup now; the journal lsn it holds."""
