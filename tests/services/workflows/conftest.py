"""Shared fixtures for workflow tests: a real store in a temporary folder, caches beside it.

``store`` is a SQLite file. A test marked ``@pytest.mark.every_backend`` (or a module with that ``pytestmark``) runs
once per backend of ``tests.support.servers.BACKENDS``: a SQLite file, and a database of its own on a real
PostgreSQL and a real MariaDB server (each skipped where it cannot be started).

The store itself (every query, every write path, the locks) is tested on every backend in ``tests/db``; the
workflows call it and nothing else, except where they hold transactions, leases or stop flags across processes
and threads. Those tests are the ones marked, so the suite does not run every workflow three times.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import db
from tests.support.servers import BACKENDS, migrated_sqlite_url


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``store`` on every backend for tests marked ``every_backend``, on SQLite for the others."""
    if "store" in metafunc.fixturenames:
        every = metafunc.definition.get_closest_marker("every_backend") is not None
        metafunc.parametrize("store", BACKENDS if every else ["sqlite"], indirect=True)


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[db.Store]:
    """A fresh migrated database per test; embedding caches go to ``tmp_path/cache``."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    if request.param != "sqlite":
        with request.getfixturevalue(f"{request.param}_server").store() as s:
            yield s
        return
    s = db.open_store(migrated_sqlite_url(tmp_path / "t.db"))
    yield s
    s.close()
