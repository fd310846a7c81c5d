"""Row sets: a later deletion drops a session's earlier rows and runs before any write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import _duckdb

from storage._rows import RowSet
from storage._tables import migrate


def _event(event_id: str, session_id: str, seq: int) -> tuple[Any, ...]:
    return (event_id, session_id, seq, "session.created.1", 1, "{}")


def _session(session_id: str, title: str) -> tuple[Any, ...]:
    return (session_id, "prj", "/work", 1, 1, f'{{"title": "{title}"}}')


def _message(message_id: str, session_id: str, seq: int) -> tuple[Any, ...]:
    return (message_id, session_id, "user", seq, 1, "{}")


def _apply(conn: Any, rows: RowSet) -> None:
    conn.execute("begin")
    for sql, columns in rows.statements():
        conn.execute(sql, columns)
    conn.execute("commit")


def test_a_deletion_removes_stored_and_earlier_rows_but_not_later_ones(tmp_path: Path) -> None:
    conn = _duckdb.connect(str(tmp_path / "rows.duckdb"))
    migrate(conn, now_ms=0)
    stored = RowSet()  # what the database already holds
    stored.events = [_event("e0", "ses_a", 0), _event("e1", "ses_b", 0)]
    stored.put("session", _session("ses_a", "old"), new=True)
    stored.put("session", _session("ses_b", "kept"), new=True)
    stored.put("session_message", _message("m0", "ses_a", 1), new=True)
    _apply(conn, stored)

    pending = RowSet()  # a backlog: more for ses_a, its deletion, then the id used again
    pending.events = [_event("e2", "ses_a", 2), _event("e3", "ses_b", 1)]
    pending.put("session_message", _message("m1", "ses_a", 2), new=True)
    pending.put("session_message", _message("m2", "ses_b", 1), new=True)
    pending.put("session", _session("ses_a", "renamed"), new=False)
    pending.epochs["ses_a"] = ("ses_a", "b", "s", "build", 0, None, 1)
    deletion = RowSet()
    deletion.deleted = {"ses_a"}
    again = RowSet()
    again.events = [_event("e4", "ses_a", 0)]
    again.put("session", _session("ses_a", "new"), new=True)
    pending.merge(deletion)
    pending.merge(again)

    assert pending.deleted == {"ses_a"}
    assert pending.statements()[0][0].startswith("delete from event where aggregate_id")
    _apply(conn, pending)

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return conn.execute(sql).fetchall()

    assert rows("select id, aggregate_id from event order by id") == [
        ("e1", "ses_b"),
        ("e3", "ses_b"),
        ("e4", "ses_a"),
    ]
    assert rows("select id, data from session order by id") == [
        ("ses_a", '{"title": "new"}'),
        ("ses_b", '{"title": "kept"}'),
    ]
    assert rows("select id from session_message order by id") == [("m2",)]
    assert rows("select count(*) from session_context_epoch") == [(0,)]
