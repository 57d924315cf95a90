"""Shared fixtures for workflow tests: a real store in a temporary folder, caches beside it.

``store`` runs each workflow test on every backend of ``tests.support.servers.BACKENDS``: a SQLite file, and a
database of its own on a real PostgreSQL and a real MariaDB server (each skipped where it cannot be started).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import db
from tests.support.servers import BACKENDS


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[db.Store]:
    """A fresh migrated database per test; embedding caches go to ``tmp_path/cache``."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    if request.param != "sqlite":
        with request.getfixturevalue(f"{request.param}_server").store() as s:
            yield s
        return
    s = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    yield s
    s.close()
