"""Fixtures for the store tests: a fresh migrated SQLite file per test (in tmp_path)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

import db
from db import Store


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Never let a developer's MRAG_* settings or real data dir leak into a test."""
    monkeypatch.delenv(db.ENV_DATABASE_URL, raising=False)
    monkeypatch.setenv(db.ENV_DATA_DIR, str(tmp_path / "default-data"))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    s = db.open_store(f"sqlite:///{db_path}")
    yield s
    s.close()


@pytest.fixture
def count_rows(store: Store) -> Callable[[str], int]:
    """Row count of a table, read with plain SQL (independent of the code under test)."""

    def count(table: str) -> int:
        with store.engine.connect() as conn:
            value = conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
            conn.rollback()
        return int(value)

    return count


@pytest.fixture
def corpus(store: Store) -> db.CorpusInfo:
    """A corpus with categories sport/politics/science and four unlabelled documents."""
    c = db.create_corpus(store, "News", "test corpus")
    db.add_categories(store, c.id, ["sport", "politics", "science"])
    db.add_documents(
        store,
        c.id,
        [{"title": f"Doc {i}", "text": f"text of document {i}", "source": "t"} for i in range(4)],
    )
    return db.get_corpus(store, c.id)


@pytest.fixture
def cats(store: Store, corpus: db.CorpusInfo) -> dict[str, int]:
    """Category name -> id of the ``corpus`` fixture."""
    return {c.name: c.id for c in db.list_categories(store, corpus.id)}


@pytest.fixture
def docs(store: Store, corpus: db.CorpusInfo) -> list[int]:
    """Document ids of the ``corpus`` fixture, ascending."""
    return db.document_ids(store, corpus.id)
