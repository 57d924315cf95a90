"""Fixtures shared by every test package: one throwaway PostgreSQL server per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.postgres import PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole test session (skips the test when none can be had)."""
    why = PostgresServer.available()
    if why is not None:
        pytest.skip(f"PostgreSQL: {why}")
    server = PostgresServer.start()
    yield server
    server.stop()
