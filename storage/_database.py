"""How the DuckDB store obtains, shares and releases its database connections.

The store calls its :class:`DatabaseOpener` for the connection to its database file,
for each cursor handed to another thread (the applier's), and to release them. The
default, :data:`OS_DATABASE`, starts one DuckDB instance per opening
(``duckdb.connect(path)``). A process that opens many stores one after another (the
simulator, ``sims``) may instead attach each file to one long-lived instance; the files
are DuckDB database files either way, and the store's SQL is the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import duckdb

__all__ = ["OS_DATABASE", "DatabaseOpener"]


class DatabaseOpener:
    """Opens the store's database file as a DuckDB connection: a new DuckDB instance
    per :meth:`connect`. Subclass it to obtain connections another way.

    Every call runs on the thread that calls it and blocks it; none is cancellable.
    """

    def connect(self, path: Path, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
        """A connection whose unqualified names resolve in the database file *path*
        (created when missing), with DuckDB settings *config*.

        Raises:
            duckdb.Error: the file does not open as a DuckDB database.
        """
        return duckdb.connect(str(path), config=config)

    def cursor(self, conn: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
        """Another connection to *conn*'s database, for another thread; release it with
        :meth:`close` before *conn*."""
        return conn.cursor()

    def close(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Release *conn* (from :meth:`connect` or :meth:`cursor`); a connection from
        :meth:`connect` leaves its database file closed, checkpointed as DuckDB does at
        close.

        Raises:
            duckdb.Error: DuckDB failed to close the file (the connection is released).
        """
        conn.close()


OS_DATABASE: Final = DatabaseOpener()
"""The default opener: one DuckDB instance per opening of the store."""
