"""Shared AppTest set-up for the page tests.

Page tests run on a new SQLite file; a test marked ``@ON_EVERY_BACKEND`` runs once per backend of
``tests.support.servers.BACKENDS`` (a SQLite file, a new database on a real PostgreSQL and on a real MariaDB
server, each skipped where its server cannot be had), so the pages' write paths are exercised on each.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import BACKENDS

LLM_ENV = ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY")

ON_EVERY_BACKEND = pytest.mark.parametrize("fresh_env", BACKENDS, indirect=True)
"""Runs a page test on every backend: the test's ``fresh_env`` database is a SQLite file, then a new database
on each server."""


@pytest.fixture
def fresh_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A new database (a SQLite file under ``tmp_path`` unless the test is parametrized with another backend)
    named by ``MRAG_DATABASE_URL``, a cache under ``tmp_path``, no LLM endpoint, and empty Streamlit caches (so a
    cached store or model from another test is not reused). Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("fresh_env")``. Yields the database URL."""
    import streamlit as st

    backend = getattr(request, "param", "sqlite")
    server = None if backend == "sqlite" else request.getfixturevalue(f"{backend}_server")
    url = f"sqlite:///{tmp_path / 't.db'}" if server is None else server.create_database()
    monkeypatch.setenv("MRAG_DATABASE_URL", url)
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield url
    st.cache_resource.clear()
    if server is not None:
        server.drop_database(url)
