"""The simulator's shared DuckDB instance: each store opening attaches its real file,
closing detaches it, and a store left open cannot write into the next process's files."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import duckdb

from sims._database import SharedDatabase
from storage import DB_FILE, EventStore
from tests.storage.test_database_opener import admit_prompts


def _inputs(directory: Path) -> int:
    with duckdb.connect(str(directory / DB_FILE), read_only=True) as conn:
        row = conn.execute("select count(*) from session_input").fetchone()
    assert row is not None
    return int(row[0])


def test_a_store_on_the_shared_instance_keeps_a_real_database_file(tmp_path: Path) -> None:
    shared = SharedDatabase()
    for round_ in range(3):
        store = EventStore.open(tmp_path, database=shared, backup_every=4)
        admit_prompts(store, round_ * 3, 3)
        store.close()
        assert shared.detach_all() == []  # closing detached it
        assert _inputs(tmp_path) == 3 * (round_ + 1)  # checkpointed into the file


def test_a_store_left_open_is_detached_before_its_files_are_replaced(tmp_path: Path) -> None:
    shared = SharedDatabase()
    data, kept = tmp_path / "data", tmp_path / "kept"
    store = EventStore.open(data, database=shared)
    admit_prompts(store, 0, 2)
    store.close()
    shutil.copytree(data, kept)  # the files as the next process will find them
    dead = EventStore.open(data, database=shared)
    admit_prompts(dead, 2, 4)  # written, and never closed: the process died
    assert len(shared.detach_all()) == 1
    shutil.rmtree(data)
    shutil.copytree(kept, data)
    store = EventStore.open(data, database=shared)
    try:
        admit_prompts(store, 10, 1)
    finally:
        store.close()
    with contextlib.suppress(Exception):
        dead.close()  # too late: its connection is gone, its files were replaced
    assert shared.detach_all() == []
    assert _inputs(data) == 3  # the dead store's rows never reached these files
