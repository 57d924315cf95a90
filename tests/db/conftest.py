"""Fixtures for the store tests: a fresh migrated database per test.

``store`` runs each test on every backend of ``tests.support.servers.BACKENDS``: a SQLite file (in tmp_path),
and a database of its own on a real PostgreSQL and a real MariaDB server (each skipped where it cannot
be started). Tests of one backend's behaviour (SQLite's pragmas and file lock, PostgreSQL's advisory
lock) take ``sqlite_store`` or ``postgresql_store``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

import db
from db import Store
from tests.support.servers import BACKENDS, migrated_sqlite_url


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Never let a developer's MRAG_* settings or real data dir leak into a test."""
    monkeypatch.delenv(db.ENV_DATABASE_URL, raising=False)
    monkeypatch.setenv(db.ENV_DATA_DIR, str(tmp_path / "default-data"))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def sqlite_store(db_path: Path) -> Iterator[Store]:
    s = db.open_store(migrated_sqlite_url(db_path))
    yield s
    s.close()


@pytest.fixture
def postgresql_store(postgresql_server) -> Iterator[Store]:
    with postgresql_server.store() as s:
        yield s


@pytest.fixture
def mysql_store(mysql_server) -> Iterator[Store]:
    with mysql_server.store() as s:
        yield s


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    yield request.getfixturevalue(f"{request.param}_store")


@pytest.fixture(params=BACKENDS)
def empty_url(request: pytest.FixtureRequest, db_path: Path) -> Iterator[str]:
    """The URL of a database nothing has opened yet (no tables), on every backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{db_path}"
        return
    server = request.getfixturevalue(f"{request.param}_server")
    url = server.create_database()
    yield url
    server.drop_database(url)


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
