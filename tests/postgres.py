"""A real PostgreSQL for tests: a temporary cluster made with Debian's binaries.

``PostgresCluster.start`` runs ``initdb`` and ``pg_ctl`` from the newest
``/usr/lib/postgresql/<version>/bin`` (Debian's ``postgresql`` package; ``make
postgresql`` installs it), listening only on a unix socket in the cluster's own
temporary directory. PostgreSQL refuses to run as root, so as root every command runs as
the unprivileged ``postgres`` user the package creates (``runuser``). Missing binaries
fail the test with a message saying so; they are never a reason to skip.

The fixtures (registered for every test by the root ``conftest.py``): ``postgres_cluster``,
one per test run, started when a test first asks for it; ``postgres_database``, the URL
of a new database per test, dropped after it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import psycopg
import pytest

__all__ = ["PostgresCluster", "find_binaries", "postgres_cluster", "postgres_database"]

_ROOT: Final = Path("/usr/lib/postgresql")
_USER: Final = "postgres"
_START_TIMEOUT: Final = 30


def find_binaries(root: Path = _ROOT) -> Path:
    """The ``bin`` directory of the newest installed PostgreSQL version.

    Calls ``pytest.fail`` (never skip) when none holds ``initdb`` and ``pg_ctl``.
    """
    versions = sorted(
        (p for p in root.glob("*/bin") if (p / "initdb").exists() and (p / "pg_ctl").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else -1,
    )
    if not versions:
        pytest.fail(
            f"PostgreSQL's initdb and pg_ctl are not installed under {root}/<version>/bin: "
            "install Debian's postgresql package (`make postgresql`)",
            pytrace=False,
        )
    return versions[-1]


class PostgresCluster:
    """A running temporary cluster; :meth:`stop` shuts it down and removes it."""

    def __init__(self, directory: Path, binaries: Path, as_user: list[str]) -> None:
        self.directory = directory
        self._binaries = binaries
        self._as_user = as_user
        self._names = itertools.count()

    @classmethod
    def start(cls) -> PostgresCluster:
        """initdb and start a cluster in a new temporary directory.

        Raises:
            subprocess.CalledProcessError: initdb or pg_ctl failed (its output attached).
        """
        binaries = find_binaries()
        directory = Path(tempfile.mkdtemp(prefix="kittiwake-pg-"))
        as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(directory, _USER, _USER)
            as_user = ["runuser", "-u", _USER, "--"]
        cluster = cls(directory, binaries, as_user)
        try:
            cluster._run(
                "initdb", "-D", str(cluster.data), "-U", _USER, "--auth=trust", "--no-sync",
                "--encoding=UTF8", "--locale=C",
            )  # fmt: skip
            options = (
                f"-c listen_addresses='' -c unix_socket_directories='{directory}' "
                "-c max_connections=50 -c shared_buffers=16MB"
            )
            cluster._run(
                "pg_ctl", "-D", str(cluster.data), "-l", str(directory / "server.log"),
                "-o", options, "-w", "-t", str(_START_TIMEOUT), "start",
            )  # fmt: skip
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return cluster

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{_USER}@/{database}?host={self.directory}"

    def create_database(self) -> str:
        """A new empty database; its URL."""
        name = f"kw_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"create database {name}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.split("?", 1)[0].rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"drop database if exists {name} with (force)")

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove the cluster's directory."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        command = [*self._as_user, str(self._binaries / program), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            log = self.directory / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise subprocess.CalledProcessError(
                done.returncode, command, done.stdout, f"{done.stderr}\n{tail}"
            )


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_database(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """The URL of a new, empty database, dropped after the test."""
    url = postgres_cluster.create_database()
    try:
        yield url
    finally:
        postgres_cluster.drop_database(url)
