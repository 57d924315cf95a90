"""Shared AppTest set-up for the page tests."""

from __future__ import annotations

from pathlib import Path

import pytest

LLM_ENV = ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY")


@pytest.fixture
def fresh_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A new SQLite file and cache under ``tmp_path``, no LLM endpoint, and empty Streamlit caches
    (so a cached store or model from another test is not reused). Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("fresh_env")``."""
    import streamlit as st

    monkeypatch.setenv("MRAG_DATABASE_URL", f"sqlite:///{tmp_path / 't.db'}")
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
