"""AppTest runs of the Query Builder and Evaluation Runs pages against a fresh database."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EVAL_PAGE = str(ROOT / "pages" / "9_Evaluation_Runs.py")
QUERY_PAGE = str(ROOT / "pages" / "8_Query_Builder.py")


@pytest.fixture(autouse=True)
def _fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MRAG_DATABASE_URL", f"sqlite:///{tmp_path / 't.db'}")
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("MRAG_LLM_MODEL", "MRAG_LLM_BASE_URL", "OPENAI_API_KEY", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()


def _frame_with(at: AppTest, column: str):
    """The first dataframe on the page that has ``column``."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no dataframe with column {column!r}")


def _store() -> db.Store:
    return db.open_store(os.environ["MRAG_DATABASE_URL"])


def test_evaluation_page_runs_demo_and_lists_it() -> None:
    at = AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.multiselect(key="ev_strats").value == ["standard", "mrag"]
    at.number_input(key="ev_kmax").set_value(8)
    at.number_input(key="ev_seed").set_value(5)
    at.button(key="ev_start").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("Run #" in s.value and "done: 48 results" in s.value for s in at.success)

    store = _store()
    runs = db.list_eval_runs(store)
    assert len(runs) == 1 and runs[0].status == "done" and runs[0].seed == 5
    assert runs[0].config["strategies"] == ["standard", "mrag"] and runs[0].config["k_max"] == 8
    store.close()

    # A fresh session (as after a restart) lists the stored run and shows its views.
    st.cache_resource.clear()
    at2 = AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    assert not at2.exception, at2.exception
    listed = at2.dataframe[0].value
    assert listed["id"].tolist() == [runs[0].id] and listed["status"].tolist() == ["done"]
    single = _frame_with(at2, "hits@1")
    assert single["strategy"].tolist() == ["standard", "mrag"]
    assert (single["hits@1"] <= single["hits@2"]).all() and (single["hits@2"] <= single["queries"]).all()
    # Compare standard vs mrag of that run: paired tests over the 24 demo queries.
    tests = _frame_with(at2, "wilcoxon_p")
    allrow = tests[tests["n_aspects"] == "all"].iloc[0]
    assert allrow["wins"] + allrow["ties"] + allrow["losses"] == 24
    assert 0.0 <= allrow["t_p"] <= 1.0
    at2.button(key="ev_cmp_open").click().run()
    assert at2.session_state["compare_query_id"] == at2.selectbox(key="ev_cmp_query").value


def test_evaluation_page_rejects_bad_layers() -> None:
    at = AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    at.text_input(key="ev_layers").set_value("last").run()
    at.button(key="ev_start").click().run()
    assert [e.value for e in at.error] == ["Layer(s) must be whole numbers separated by commas, e.g. -1 or 2,4,5."]
    store = _store()
    assert db.list_eval_runs(store) == []
    store.close()


def _demo_set_ids(store: db.Store) -> tuple[int, dict[str, int]]:
    corpus = db.list_corpora(store)[0]
    return corpus.id, {s.name: s.id for s in db.list_query_sets(store, corpus.id)}


def test_query_builder_offline_generation_and_hand_written_query() -> None:
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    assert any("offline composer" in i.value for i in at.info)
    at.text_input(key="qb_gen_name").set_value("Offline A")
    at.multiselect(key="qb_gen_counts").set_value([1, 3])
    at.number_input(key="qb_gen_per").set_value(2)
    at.number_input(key="qb_gen_seed").set_value(4)
    at.button(key="qb_gen_start").click().run()
    assert not at.exception, at.exception
    assert [s.value for s in at.success] == ["Query set ready: 4 ok, 0 flagged, 0 failed."]
    store = _store()
    corpus_id, sets = _demo_set_ids(store)
    qs = db.get_query_set(store, sets["Offline A"])
    assert qs.source == "generated-offline" and qs.n_queries == 4
    assert sorted(q.n_aspects for q in db.list_queries(store, qs.id)) == [1, 1, 3, 3]
    # The review tab shows the new set.
    review = [df.value for df in at.dataframe if "ground truth" in df.value.columns][0]
    assert len(review) == 4 and set(review["status"]) == {"ok"}

    # Hand-written query: search the corpus, add two documents, save into a new set.
    at.text_input(key="qb_hand_search").set_value("Eddystone").run()
    pharos = db.list_documents(store, corpus_id, search="Eddystone Lighthouse").items[0]
    at.button(key=f"qb_pick_{pharos.id}").click().run()
    at.text_input(key="qb_hand_search").set_value("Pharos").run()
    other = db.list_documents(store, corpus_id, search="Pharos of Alexandria").items[0]
    at.button(key=f"qb_pick_{other.id}").click().run()
    at.text_input(key="qb_hand_new").set_value("Mine")
    at.text_area(key="qb_hand_text").set_value("Compare the Eddystone Lighthouse with the Pharos of Alexandria.")
    at.button(key="qb_hand_add").click().run()
    assert not at.exception, at.exception
    _, sets = _demo_set_ids(store)
    (mine,) = db.list_queries(store, sets["Mine"])
    assert mine.ground_truth == [pharos.id, other.id] and mine.status == "ok" and mine.generator == "hand-written"
    store.close()


def test_query_builder_llm_generation_flags_missing_title(monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    from tests.support.openai_server import FakeOpenAIServer, by_content

    def story(prompt: str) -> str:
        titles = re.findall(r"^Article \d+: (.+)$", prompt, flags=re.MULTILINE)
        if not titles:
            return "a sub-query\nanother sub-query"
        named = titles[:1]  # a 2-article story names only the first title -> flagged
        return ("In this long and winding story " + " and ".join(named) +
                " played the main part among many other details worth telling here.")

    with FakeOpenAIServer(by_content(story)) as server:
        monkeypatch.setenv("MRAG_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("MRAG_LLM_MODEL", "fake-model")
        monkeypatch.setenv("MRAG_LLM_MAX_RETRIES", "0")
        at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()
        assert not at.exception, at.exception
        assert not any("offline composer" in i.value for i in at.info)
        at.text_input(key="qb_gen_name").set_value("LLM")
        at.multiselect(key="qb_gen_counts").set_value([1, 2])
        at.number_input(key="qb_gen_per").set_value(1)
        at.button(key="qb_gen_start").click().run()
        assert not at.exception, at.exception
        assert [s.value for s in at.success][-1] == "Query set ready: 1 ok, 1 flagged, 0 failed."
        assert at.success[0].value.startswith("Stories are written by the LLM: model 'fake-model'")
        assert any(e.label.startswith("#") and "flagged" in e.label and "missing titles" in e.label
                   for e in at.expander)
    store = _store()
    _, sets = _demo_set_ids(store)
    assert db.get_query_set(store, sets["LLM"]).source == "generated-llm"
    store.close()
