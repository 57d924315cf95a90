"""AppTest of the landing page: opens with no LLM key configured and loads the demo corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import db
from services.demo import DEMO_CORPUS_NAME, load_demo
from tests.ui.conftest import ON_EVERY_BACKEND

APP = str(Path(__file__).resolve().parents[2] / "app.py")


pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


@ON_EVERY_BACKEND
def test_landing_loads_demo_without_llm_key() -> None:
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    demo = load_demo()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Corpora": "1", "Documents": str(len(demo.documents)), "Query sets": "1"}
    assert any("No LLM endpoint configured" in i.value for i in at.info)
    assert not at.error
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
    assert corpus.n_documents == len(demo.documents) and corpus.n_categories == len(demo.categories)
    # a second start does not duplicate anything
    st.cache_resource.clear()
    at2 = AppTest.from_file(APP, default_timeout=60).run()
    assert {m.label: m.value for m in at2.metric}["Documents"] == str(len(demo.documents))


def test_landing_shows_configured_endpoint_without_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRAG_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MRAG_LLM_MODEL", "tiny_model_v2")  # Markdown would read _model_ as emphasis
    monkeypatch.setenv("MRAG_LLM_API_KEY", "sk-secretsecret123")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert at.success and r"'tiny\_model\_v2'" in at.success[0].value  # escaped: shown verbatim
    assert "sk-secret" not in at.success[0].value


def test_landing_links_every_page_and_names_the_database(tmp_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    linked = {link.proto.page for link in at.page_link}  # the page's URL name: "pages/4_Index.py" -> "Index"
    pages_dir = Path(APP).parent / "pages"
    assert linked == {p.stem.split("_", 1)[1] for p in pages_dir.glob("*.py")}  # a new page cannot be left out
    labels = {link.proto.label.split(": ", 1)[0] for link in at.page_link}
    assert {"Corpus Import", "Annotate and Review", "Index", "Evaluation Runs", "Reader"} <= labels
    starts = [b.label for b in at.button if b.key.startswith("home_step_")]
    assert [s.split(" ", 1)[0] for s in starts] == ["1.", "2.", "3."] and "Compare" in starts[1]
    assert str(tmp_path / "t.db") in " ".join(c.value for c in at.caption)


def test_landing_says_whether_the_demo_index_is_built() -> None:
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert any("demo corpus has no index yet" in i.value for i in at.info)
    assert not at.success
    # a finished run over the demo corpus (as the Index page leaves one), then a fresh start of the page
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
    run = db.create_embedding_run(store, corpus.id, model_name="minilm", layer=5, pooling="mean", n_heads=2,
                                  head_dim=2, dim=4)
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert any("demo corpus has no index yet" in i.value for i in at.info)  # still running: not ready
    db.finish_embedding_run(store, run.id)
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not any("demo corpus has no index yet" in i.value for i in at.info)
    assert any(f"finished index (#{run.id}: minilm, layer 5)" in s.value for s in at.success)


@ON_EVERY_BACKEND
def test_a_deleted_demo_corpus_stays_deleted_and_can_be_restored() -> None:
    AppTest.from_file(APP, default_timeout=60).run()
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    db.delete_corpus(store, db.get_corpus_by_name(store, DEMO_CORPUS_NAME).id)
    st.cache_resource.clear()  # as after a server restart
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    assert {m.label: m.value for m in at.metric}["Corpora"] == "0" and db.list_corpora(store) == []
    assert any("The demo corpus was deleted" in i.value for i in at.info)
    at.button(key="home_restore_demo").click().run()
    assert not at.exception, [e.value for e in at.exception]
    corpus = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
    assert corpus.n_documents == len(load_demo().documents)
    assert len(db.list_queries(store, db.list_query_sets(store, corpus.id)[0].id)) == len(load_demo().queries)
    assert any("demo corpus has no index yet" in i.value for i in at.info)
    assert "home_restore_demo" not in [b.key for b in at.button]


def test_a_renamed_demo_corpus_is_still_the_one_home_talks_about() -> None:
    AppTest.from_file(APP, default_timeout=60).run()
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
    db.rename_corpus(store, corpus.id, "Volcanoes and more")
    run = db.create_embedding_run(store, corpus.id, model_name="minilm", layer=5, pooling="mean", n_heads=2,
                                  head_dim=2, dim=4)
    db.finish_embedding_run(store, run.id)
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert {m.label: m.value for m in at.metric}["Corpora"] == "1"  # not created again under its old name
    assert any(f"finished index (#{run.id}: minilm, layer 5)" in s.value for s in at.success)


def test_start_here_steps_open_their_page_on_the_demo_corpus() -> None:
    """Another corpus sorts first (a page's default); each step still opens the demo corpus, also after the user
    chose another one."""
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    AppTest.from_file(APP, default_timeout=60).run()  # loads the demo
    other = db.create_corpus(store, "Aardvark notes")
    db.add_documents(store, other.id, [{"text": "a note", "label": "x"}])
    demo = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["corpus_id"] = other.id  # chosen on some page before
    at.run()
    at.button(key="home_step_2").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["corpus_id"] == demo.id
    assert at.title[0].value == "Compare" and at.selectbox(key="_corpus_id_select").value.id == demo.id


def test_step_3_opens_evaluation_runs_on_the_demo_query_set_not_the_newest() -> None:
    """A set generated later is the corpus' newest (the page's default), and the user had chosen it before: step 3
    still opens Evaluation Runs on the demo's own 24 queries (it opened on the newest set)."""
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    AppTest.from_file(APP, default_timeout=60).run()  # loads the demo
    demo = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
    (demo_set,) = db.list_query_sets(store, demo.id)
    newer = db.create_query_set(store, demo.id, "Generated later", source="manual")
    assert db.list_query_sets(store, demo.id)[0].id == newer.id
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["_ev_qs_ident"] = newer.id  # chosen on Evaluation Runs before
    at.run()
    at.button(key="home_step_3").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Evaluation Runs"
    chosen = at.selectbox(key="ev_qs").value
    assert (chosen.id, chosen.name, chosen.n_queries) == (demo_set.id, "Demo queries", 24)
    store.close()
