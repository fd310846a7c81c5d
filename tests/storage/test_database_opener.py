"""The store obtains and releases its DuckDB connections through its DatabaseOpener."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from runtime import Prompt
from runtime import events as ev
from storage import DB_FILE, OS_DATABASE, AdmitPrompt, DatabaseOpener, EventStore


class _Counting(DatabaseOpener):
    """The default opener, counting what it hands out and what comes back."""

    def __init__(self) -> None:
        self.given: list[duckdb.DuckDBPyConnection] = []
        self.released: list[duckdb.DuckDBPyConnection] = []
        self.paths: list[Path] = []

    def connect(self, path: Path, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
        self.paths.append(path)
        conn = super().connect(path, config)
        self.given.append(conn)
        return conn

    def cursor(self, conn: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
        assert any(conn is c for c in self.given)
        cursor = super().cursor(conn)
        self.given.append(cursor)
        return cursor

    def close(self, conn: duckdb.DuckDBPyConnection) -> None:
        self.released.append(conn)
        super().close(conn)


def admit_prompts(store: EventStore, first: int, n: int) -> None:
    """Session ``ses_a`` and *n* queued prompts ``msg_{first:04d}`` on, a batch each."""
    info = ev.SessionInfo(
        id="ses_a", project_id="p", location=ev.Location(directory="/a"), title="t",
        time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip
    store.write_batch([lambda b: b.create_session(info)])
    for i in range(first, first + n):
        op = AdmitPrompt(
            session_id="ses_a", message_id=f"msg_{i:04d}", prompt=Prompt(text="p"),
            delivery="queue", timestamp=i, fresh=True,
        )  # fmt: skip
        store.write_batch([op])


def test_every_connection_the_store_takes_is_released_at_close(tmp_path: Path) -> None:
    opener = _Counting()
    store = EventStore.open(tmp_path, database=opener, backup_every=3)
    admit_prompts(store, 0, 5)
    assert store.statistics().backups >= 1  # the backup's check ran on the same connection
    store.close()
    assert opener.paths == [tmp_path / DB_FILE]
    assert len(opener.given) == 2  # the store's connection and the applier's cursor
    assert sorted(map(id, opener.given)) == sorted(map(id, opener.released))
    # The default opener: a DuckDB file any process can open.
    with duckdb.connect(str(tmp_path / DB_FILE), read_only=True) as conn:
        row = conn.execute("select count(*) from session_input").fetchone()
    assert row == (5,)
    assert isinstance(OS_DATABASE, DatabaseOpener)
