"""AppTest of the landing page: opens with no LLM key configured and loads the demo corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import db
from mrag_core.demo import DEMO_CORPUS_NAME, load_demo

APP = str(Path(__file__).resolve().parents[2] / "app.py")


pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_landing_loads_demo_without_llm_key(tmp_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    demo = load_demo()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Corpora": "1", "Documents": str(len(demo.documents)), "Query sets": "1"}
    assert any("No LLM endpoint configured" in i.value for i in at.info)
    assert not at.error
    store = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    corpus = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
    assert corpus.n_documents == len(demo.documents) and corpus.n_categories == len(demo.categories)
    # a second start does not duplicate anything
    st.cache_resource.clear()
    at2 = AppTest.from_file(APP, default_timeout=60).run()
    assert {m.label: m.value for m in at2.metric}["Documents"] == str(len(demo.documents))


def test_landing_shows_configured_endpoint_without_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRAG_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MRAG_LLM_MODEL", "tiny-model")
    monkeypatch.setenv("MRAG_LLM_API_KEY", "sk-secretsecret123")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert at.success and "tiny-model" in at.success[0].value
    assert "sk-secret" not in at.success[0].value
