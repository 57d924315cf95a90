"""Shared fixtures for workflow tests: a real SQLite store in a temporary folder, caches beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

import db


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh migrated SQLite file per test; embedding caches go to ``tmp_path/cache``."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    s = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    yield s
    s.close()
