"""Fixtures shared by every test package: one throwaway database server of each kind per test session, and one
demo index database (``demo_index_db``) that page and browser tests copy instead of building it again.

``tests.support.servers.BACKENDS`` are the databases the store and workflow tests run on: a SQLite
file, and a database of its own on a real PostgreSQL and a real MariaDB server (each skipped where
its server cannot be had).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.components.v2 import manifest_scanner

from tests.support.mariadb import MariaDBServer
from tests.support.postgres import PostgresServer
from tests.support.servers import DatabaseServer


def _scan_once() -> None:
    """Every ``AppTest.run`` scans all installed packages' metadata for Streamlit components (about 1 s here, a
    third of a page test's time); a server scans once at start. The installed packages do not change during a
    test session, so the first scan's answer is kept (a list per call, as the original returns)."""
    scan = manifest_scanner.scan_component_manifests
    found: list = []

    def scan_component_manifests(max_workers: int | None = None) -> list:
        if not found:
            found.append(scan(max_workers))
        return list(found[0])

    manifest_scanner.scan_component_manifests = scan_component_manifests


_scan_once()


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


@pytest.fixture(scope="session")
def demo_index_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file holding the demo corpus with a finished MiniLM index, built once per session
    (tests/support/demo_index.py); copy it with ``copy_demo_index``, never open it."""
    from tests.support.demo_index import build_demo_index

    folder = tmp_path_factory.mktemp("demo-index")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MRAG_CACHE_DIR", str(folder / "cache"))
        mp.setenv("OMP_WAIT_POLICY", "PASSIVE")
        build_demo_index(folder / "demo.db")
    return folder / "demo.db"
