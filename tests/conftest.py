"""Fixtures shared by every test package: one throwaway database server of each kind per test session.

``tests.support.servers.BACKENDS`` are the databases the store and workflow tests run on: a SQLite
file, and a database of its own on a real PostgreSQL and a real MariaDB server (each skipped where
its server cannot be had).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.mariadb import MariaDBServer
from tests.support.postgres import PostgresServer
from tests.support.servers import DatabaseServer


def _serve(kind: type[PostgresServer] | type[MariaDBServer], name: str) -> Iterator[DatabaseServer]:
    why = kind.available()
    if why is not None:
        pytest.skip(f"{name}: {why}")
    server = kind.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgresql_server() -> Iterator[DatabaseServer]:
    """One PostgreSQL server for the whole test session (skips the test when none can be had)."""
    yield from _serve(PostgresServer, "PostgreSQL")


@pytest.fixture(scope="session")
def mysql_server() -> Iterator[DatabaseServer]:
    """One MariaDB server for the whole test session (skips the test when none can be had)."""
    yield from _serve(MariaDBServer, "MariaDB")
