"""What the store costs in memory: DuckDB's settings."""

from __future__ import annotations

from pathlib import Path

from storage import EventStore


def _settings(store: EventStore, *names: str) -> tuple[object, ...]:
    columns = ", ".join(f"current_setting('{name}')" for name in names)
    row = store.conn.execute(f"select {columns}").fetchone()
    assert row is not None
    return tuple(row)


def test_the_connection_is_opened_with_bounded_threads_and_memory(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path, db_memory_mb=64, db_threads=2)
    try:
        threads, async_threads, limit, fsync = _settings(
            store, "threads", "async_threads", "memory_limit", "fsync_mode"
        )
    finally:
        store.close()
    assert (threads, async_threads, fsync) == (2, 0, "NONE")
    assert limit == "61.0 MiB"  # 64 MB


def test_no_progress_bar_is_drawn_on_the_servers_terminal(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path)
    try:
        assert _settings(store, "enable_progress_bar") == (False,)
        applier = store.conn.cursor()  # as the applier's own cursor is made
        assert applier.execute("select current_setting('enable_progress_bar')").fetchone() == (
            False,
        )
    finally:
        store.close()


def test_db_fsync_keeps_duckdbs_own_syncs(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path, db_fsync=True)
    try:
        assert _settings(store, "fsync_mode", "threads") == ("STANDARD", 1)
    finally:
        store.close()
