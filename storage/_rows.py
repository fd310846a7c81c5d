"""Row sets: the final state of the rows one or more batches wrote, one statement per table.

Merging batches keeps the last state of every row, so the applier writes a whole
backlog with one ``insert ... select unnest(?)`` and one ``update ... from unnest``
per table instead of a statement per batch and table.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["TABLES", "RowSet", "Statements"]

Statements = list[tuple[str, list[list[Any]]]]

TABLES: Final[dict[str, tuple[str, ...]]] = {
    "session": ("id", "project_id", "directory", "time_created", "time_updated", "data"),
    "session_input": (
        "id",
        "session_id",
        "prompt",
        "delivery",
        "admitted_seq",
        "promoted_seq",
        "time_created",
    ),  # fmt: skip
    "session_message": ("id", "session_id", "type", "seq", "time_created", "data"),
    "permission_request": ("id", "session_id", "status", "time_created", "data"),
}
# The column naming the session in each of TABLES (for dropping a deleted session's rows).
_SESSION_COLUMN: Final = {
    "session": 0,
    "session_input": 1,
    "session_message": 1,
    "permission_request": 1,
}
# What a session's deletion removes from the database: the table and its session column.
_SESSION_ROWS: Final = (
    ("event", "aggregate_id"),
    ("session_input", "session_id"),
    ("session_message", "session_id"),
    ("permission_request", "session_id"),
    ("session_context_epoch", "session_id"),
    ("session", "id"),
)
_EVENT_WIDTH: Final = 6
_APPROVAL_WIDTH: Final = 4
_RECORD_WIDTH: Final = 4
_EPOCH_WIDTH: Final = 7


class RowSet:
    """Rows to insert (new keys) and to update (existing keys), events, approvals, epochs.

    Every row is the table's full tuple in ``TABLES`` column order; an epoch entry of
    ``None`` means the session's epoch row is deleted. ``deleted`` names sessions whose
    every row is removed before the set's rows are written: the rows a set holds were all
    written after those deletions.
    """

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.new: dict[str, dict[str, tuple[Any, ...]]] = {t: {} for t in TABLES}
        self.changed: dict[str, dict[str, tuple[Any, ...]]] = {t: {} for t in TABLES}
        self.approvals: list[tuple[Any, ...]] = []
        self.records: dict[tuple[str, str], tuple[Any, ...]] = {}
        """Records by ``(kind, id)``, each replacing the stored one (``storage._records``)."""
        self.epochs: dict[str, tuple[Any, ...] | None] = {}
        self.deleted: set[str] = set()

    def put(self, table: str, row: tuple[Any, ...], *, new: bool) -> None:
        key = row[0]
        if new or key in self.new[table]:
            self.new[table][key] = row
        else:
            self.changed[table][key] = row

    def merge(self, later: RowSet) -> None:
        """Fold *later* (written after this set) in; the later state of a row wins, and a
        session *later* deleted loses every row this set held for it."""
        if later.deleted:
            self._drop(later.deleted)
        self.events.extend(later.events)
        self.approvals.extend(later.approvals)
        self.records.update(later.records)
        for table in TABLES:
            for row in later.new[table].values():
                self.put(table, row, new=True)
            for row in later.changed[table].values():
                self.put(table, row, new=False)
        self.epochs.update(later.epochs)

    def _drop(self, sessions: set[str]) -> None:
        self.events = [row for row in self.events if row[1] not in sessions]
        for table, column in _SESSION_COLUMN.items():
            for rows in (self.new[table], self.changed[table]):
                for key in [key for key, row in rows.items() if row[column] in sessions]:
                    del rows[key]
        for session_id in sessions:
            self.epochs.pop(session_id, None)
        self.deleted |= sessions

    def statements(self) -> Statements:
        """The SQL with its column lists; empty parts are left out. Deletions come first."""
        out: Statements = []
        if self.deleted:
            ids = [sorted(self.deleted)]
            for table, column in _SESSION_ROWS:
                out.append((f"delete from {table} where {column} in (select unnest(?))", ids))
        _add(out, _insert("event", _EVENT_WIDTH), self.events)
        for table, columns in TABLES.items():
            _add(out, _insert(table, len(columns)), list(self.new[table].values()))
            _add(out, _update(table, columns), list(self.changed[table].values()))
        _add(out, _insert("permission_approval", _APPROVAL_WIDTH), self.approvals)
        replace = _insert("record", _RECORD_WIDTH).replace("insert", "insert or replace", 1)
        _add(out, replace, list(self.records.values()))
        if self.epochs:
            delete = "delete from session_context_epoch where session_id in (select unnest(?))"
            out.append((delete, [sorted(self.epochs)]))
            rows = [row for row in self.epochs.values() if row is not None]
            _add(out, _insert("session_context_epoch", _EPOCH_WIDTH), rows)
        return out


def _add(out: Statements, sql: str, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        out.append((sql, [list(column) for column in zip(*rows, strict=True)]))


def _insert(table: str, width: int) -> str:
    return f"insert into {table} select " + ", ".join(["unnest(?)"] * width)


def _update(table: str, columns: tuple[str, ...]) -> str:
    names = ", ".join(f"unnest(?) as c{i}" for i in range(len(columns)))
    sets = ", ".join(f"{c} = u.c{i}" for i, c in enumerate(columns) if i > 0)
    return f"update {table} set {sets} from (select {names}) u where {table}.{columns[0]} = u.c0"
