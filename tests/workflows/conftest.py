"""Shared fixtures for workflow tests: a real store in a temporary folder, caches beside it.

``store`` runs each workflow test twice: on a SQLite file and on a database of its own on a real
PostgreSQL server (skipped where none can be started, see :mod:`tests.support.postgres`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import db


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[db.Store]:
    """A fresh migrated database per test; embedding caches go to ``tmp_path/cache``."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    if request.param == "postgresql":
        with request.getfixturevalue("postgres_server").store() as s:
            yield s
        return
    s = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    yield s
    s.close()
