"""A real PostgreSQL for the storage tests: one temporary cluster per test run, a fresh
database per test (see ``tests.postgres``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import PostgresCluster


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
