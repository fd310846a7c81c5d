"""One DuckDB instance per simulator process; each opening of a store attaches its file.

Starting a DuckDB instance costs about 20 ms and closing one as much, whatever the
file: most of a small seed's CPU when every store restart and simulated process opened
its own. Attaching a file to a long-lived instance costs a few milliseconds. The files
are the store's own DuckDB files in the seed's data directory either way; a detach
checkpoints and closes the file as closing an instance does.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Final

import duckdb

from storage import DatabaseOpener

__all__ = ["SHARED_DATABASE", "SharedDatabase"]

_BUILTIN: Final = frozenset({"memory", "system", "temp"})


class SharedDatabase(DatabaseOpener):
    """A :class:`storage.DatabaseOpener` attaching each store's file to one in-memory
    DuckDB instance, started at the first :meth:`connect` with that call's settings.

    Not thread-safe for :meth:`connect` and :meth:`close` (one store opens at a time, on
    the simulation's thread); the connections it returns are used as DuckDB allows.
    """

    def __init__(self) -> None:
        self._instance: duckdb.DuckDBPyConnection | None = None
        self._names = itertools.count()
        self._opened: dict[int, _Opened] = {}
        """By the id of each connection from :meth:`connect`."""

    def connect(self, path: Path, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
        if self._instance is None:
            self._instance = duckdb.connect(":memory:", config=config)
        name = f"store{next(self._names)}"
        conn = self._instance.cursor()
        try:
            conn.execute(f"attach ? as {name}", [str(path)])
            conn.execute(f"use {name}")
        except BaseException:
            conn.execute(f"detach database if exists {name}")
            conn.close()
            raise
        self._opened[id(conn)] = _Opened(name, conn)
        return conn

    def cursor(self, conn: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
        opened = self._opened[id(conn)]
        cursor = conn.cursor()
        cursor.execute(f"use {opened.name}")  # a cursor starts in the instance's default
        opened.cursors.append(cursor)
        return cursor

    def close(self, conn: duckdb.DuckDBPyConnection) -> None:
        opened = self._opened.pop(id(conn), None)
        if opened is None:  # a cursor
            for other in self._opened.values():
                other.cursors[:] = [c for c in other.cursors if c is not conn]
            conn.close()
            return
        try:
            for cursor in opened.cursors:
                cursor.close()
            conn.execute("use memory")
            conn.execute(f"detach {opened.name}")
        finally:
            conn.close()

    def detach_all(self) -> list[str]:
        """Detach every store database still attached (a store left unclosed); return
        their names. Called when a simulated process has ended, before its files are
        replaced, so nothing of it writes into the next one's files."""
        if self._instance is None:
            return []
        rows = self._instance.execute("select database_name from duckdb_databases()").fetchall()
        left = sorted(str(name) for (name,) in rows if name not in _BUILTIN)
        for opened in self._opened.values():
            for cursor in [*opened.cursors, opened.conn]:
                cursor.close()
        self._opened.clear()
        for name in left:
            self._instance.execute(f"detach {name}")
        return left


class _Opened:
    """A store's database in the instance: its name, its connection, the cursors taken."""

    def __init__(self, name: str, conn: duckdb.DuckDBPyConnection) -> None:
        self.name = name
        self.conn = conn
        self.cursors: list[duckdb.DuckDBPyConnection] = []


SHARED_DATABASE: Final = SharedDatabase()
"""The simulator process's instance (each worker process of ``sims run`` has its own)."""
