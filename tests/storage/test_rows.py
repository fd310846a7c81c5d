"""Deletions in row sets and batches: earlier rows dropped, deletes first, undone on failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import Location, Prompt
from runtime import events as ev
from storage import EventStore, WriteBatch
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
    conn = duckdb.connect(str(tmp_path / "rows.duckdb"))
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


# -- any backlog, merged, writes what its batches write one by one ---------------------------

_SESSIONS = ("ses_a", "ses_b")
_step = st.one_of(
    st.tuples(st.just("message"), st.sampled_from(_SESSIONS), st.integers(0, 3)),
    st.tuples(st.just("session"), st.sampled_from(_SESSIONS), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.sampled_from(_SESSIONS), st.just(0)),
)


def _batch(steps: list[tuple[str, str, int]], serial: list[int], held: dict[str, str]) -> RowSet:
    """One batch's row set, as a WriteBatch makes it: rows are new unless the store holds
    their key (*held*: key -> session, kept up to date), and a deletion drops the batch's
    earlier rows of that session (they are never in its row set)."""
    rows = RowSet()
    for kind, session_id, n in steps:
        serial[0] += 1
        if kind == "delete":
            rows._drop({session_id})
            for key in [k for k, owner in held.items() if owner == session_id]:
                del held[key]
            continue
        if kind == "message":
            rows.events.append(_event(f"e{serial[0]}", session_id, serial[0]))
            row = _message(f"m{n}-{session_id}", session_id, n)
            table = "session_message"
        else:
            row = _session(session_id, f"v{serial[0]}")
            table = "session"
        rows.put(table, row, new=row[0] not in held)
        held[row[0]] = session_id
    return rows


def _state(conn: Any) -> tuple[list[Any], ...]:
    return tuple(
        conn.execute(f"select * from {table} order by all").fetchall()
        for table in ("event", "session", "session_message")
    )


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(_step, max_size=4), min_size=1, max_size=6),
       cut=st.integers(0, 6))  # fmt: skip
def test_merging_a_backlog_writes_what_its_batches_write_in_turn(
    tmp_path_factory: Any, batches: list[list[tuple[str, str, int]]], cut: int
) -> None:
    where = tmp_path_factory.mktemp("merge")
    one_by_one = duckdb.connect(str(where / "serial.duckdb"))
    merged = duckdb.connect(str(where / "merged.duckdb"))
    for conn in (one_by_one, merged):
        migrate(conn, now_ms=0)
    serial, held = [0], {}
    sets = [_batch(steps, serial, held) for steps in batches]
    for rows in sets:
        _apply(one_by_one, rows)
    # The applier merges whatever backlog it finds: here two, split at *cut*.
    for backlog in (sets[:cut], sets[cut:]):
        if backlog:
            total = RowSet()
            for rows in backlog:
                total.merge(rows)
            _apply(merged, total)
    assert _state(merged) == _state(one_by_one)


def test_an_operation_that_fails_after_a_deletion_leaves_the_session(tmp_path: Path) -> None:
    info = ev.SessionInfo(
        id="ses_kept", project_id="prj", location=Location(directory=str(tmp_path)),
        title="kept", time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip
    store = EventStore.open(tmp_path)
    try:
        store.write_batch([lambda b: b.create_session(info)])

        def delete_then_fail(b: WriteBatch) -> None:
            b.delete_session("ses_kept", 2)
            raise RuntimeError("changed its mind")

        def admit(b: WriteBatch) -> Any:
            return b.admit("ses_kept", "msg_after", Prompt(text="still here"), "queue", 3)

        outcomes, events = store.write_batch([delete_then_fail, admit])
        assert isinstance(outcomes[0].error, RuntimeError)
        assert outcomes[1].error is None
        assert [e.type for e in events] == ["session.next.prompt.admitted"]
        assert store.get_session("ses_kept") == info
        assert [r.id for r in store.pending_inputs("ses_kept")] == ["msg_after"]
    finally:
        store.close()
