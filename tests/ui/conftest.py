"""Shared AppTest set-up for the page tests.

Page tests run on a new SQLite file; a test marked ``@ON_EVERY_BACKEND`` runs once per backend of
``tests.support.servers.BACKENDS`` (a SQLite file, a new database on a real PostgreSQL and on a real MariaDB
server, each skipped where its server cannot be had), so the pages' write paths are exercised on each.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.demo_index import copy_demo_index
from tests.support.servers import BACKENDS

LLM_ENV = ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY")

ON_EVERY_BACKEND = pytest.mark.parametrize("fresh_env", BACKENDS, indirect=True)
"""Runs a page test on every backend: the test's ``fresh_env`` database is a SQLite file, then a new database
on each server."""


@contextmanager
def module_env(tmp_path_factory: pytest.TempPathFactory, name: str, start_from: Path | None = None) -> Iterator[Path]:
    """For a module's shared pages (a module-scoped fixture): a new SQLite file and caches in a temporary folder
    called ``name``, no LLM endpoint, Streamlit's resource cache empty before and after. ``start_from``: a SQLite
    file the database starts as a copy of (the session's ``demo_index_db``). Yields the folder."""
    import streamlit as st

    tmp = tmp_path_factory.mktemp(name)
    if start_from is not None:
        copy_demo_index(start_from, tmp / "t.db")
    mp = pytest.MonkeyPatch()
    mp.setenv("MRAG_DATABASE_URL", f"sqlite:///{tmp / 't.db'}")
    mp.setenv("MRAG_CACHE_DIR", str(tmp / "cache"))
    mp.setenv("OMP_WAIT_POLICY", "PASSIVE")
    for var in LLM_ENV:
        mp.delenv(var, raising=False)
    st.cache_resource.clear()
    try:
        yield tmp
    finally:
        st.cache_resource.clear()
        mp.undo()


def build_through_index_page(at: Any, timeout: float = 300) -> Any:
    """Click the Index page's Build (``at``: the page, run) and rerun it until the build reports success; returns
    the page. Fails on an exception on the page or when the build has not finished within ``timeout`` s."""
    import time

    at.button(key="index_build").click().run()
    deadline = time.time() + timeout
    while not at.success and time.time() < deadline:
        assert not at.exception, [e.value for e in at.exception]
        time.sleep(1.0)
        at.run()
    assert at.success, "the index was not built"
    return at


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


@pytest.fixture
def demo_indexed(fresh_env: str, demo_index_db: Path) -> str:
    """``fresh_env`` whose SQLite database starts as the session's demo index (the demo corpus and query set, a
    finished MiniLM index of the last layer: tests/support/demo_index.py), for tests that need an index only to
    exist. Returns the database URL."""
    assert fresh_env.startswith("sqlite:///"), "the demo index is a SQLite file"
    copy_demo_index(demo_index_db, Path(fresh_env.removeprefix("sqlite:///")))
    return fresh_env
