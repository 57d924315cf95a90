"""AppTest runs of the Query Builder and Evaluation Runs pages against a fresh database."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402
from mrag_core.settings import RetrievalSettings  # noqa: E402
from tests.support.apptest import confirm_and_click  # noqa: E402
from tests.ui.conftest import ON_EVERY_BACKEND  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EVAL_PAGE = str(ROOT / "pages" / "9_Evaluation_Runs.py")
QUERY_PAGE = str(ROOT / "pages" / "8_Query_Builder.py")


pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _frame_with(at: AppTest, column: str):
    """The first dataframe on the page that has ``column``."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no dataframe with column {column!r}")


def _store() -> db.Store:
    return db.open_store(os.environ["MRAG_DATABASE_URL"])


def test_evaluation_page_runs_demo_and_lists_it() -> None:
    """On SQLite only: the run's writes are the workflow's, tested on every backend in tests/services/workflows
    (test_evaluation_runs, the tests marked every_backend)."""
    at = AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.multiselect(key="ev_strats").value == ["standard", "mrag"]
    at.number_input(key="ev_kmax").set_value(8)
    at.number_input(key="ev_seed").set_value(5)
    at.button(key="ev_start").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("Run #" in s.value and "done: 48 results" in s.value for s in at.success)
    assert not [b for b in at.button if b.key == "ev_stop"]  # Stop shows only while the run works

    store = _store()
    runs = db.list_eval_runs(store)
    assert len(runs) == 1 and runs[0].status == "done" and runs[0].seed == 5
    assert runs[0].config["strategies"] == ["standard", "mrag"] and runs[0].config["k_max"] == 8
    (kept,) = db.list_embedding_runs(store, corpus_id=runs[0].corpus_id)  # the corpus had no index: one was built
    store.close()

    # A fresh session (as after a restart) lists the stored run and shows its views.
    st.cache_resource.clear()
    at2 = AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    assert not at2.exception, at2.exception
    listed = at2.dataframe[0].value
    assert listed["id"].tolist() == [runs[0].id] and listed["status"].tolist() == ["done"]
    assert listed["index"].tolist() == [f"#{kept.id}"] and kept.status == "done"
    accuracy = at2.dataframe[1].value  # no strategy used an LLM: accuracy only, no all-zero token columns
    assert accuracy.columns.tolist() == ["strategy", "rsr", "rsr 95% CI", "csr", "csr 95% CI", "weighted",
                                         "weighted 95% CI", "search_s"]
    assert "Accuracy" in [h.value for h in at2.subheader]
    # Each strategy has one colour in every chart (the improvement chart has no 'standard' to shift them).
    traces = [t for c in at2.get("plotly_chart") for t in json.loads(c.proto.spec)["data"]]
    colours = {(t["name"], t.get("line", {}).get("color") or t["marker"]["color"])
               for t in traces if t.get("name") in ("standard", "mrag")}
    assert colours == {("standard", "#7f7f7f"), ("mrag", "#1f77b4")}
    assert sum(1 for t in traces if t.get("name") == "mrag") >= 3  # curves (2 facets), histogram, improvement
    single = _frame_with(at2, "hits@1")
    assert single["strategy"].tolist() == ["standard", "mrag"]
    assert (single["hits@1"] <= single["hits@2"]).all() and (single["hits@2"] <= single["queries"]).all()
    exports = [b.proto.label for b in at2.get("download_button") if not b.proto.label.startswith("Download chart")]
    assert exports == ["Run as JSON", "Run as the MRAG authors' result file", "Run for the authors' plotter",
                       "Per-query results (CSV)", "Comparison with intervals (CSV)"]  # the last on Compare runs
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


def test_evaluation_page_llm_strategies_disabled_without_endpoint() -> None:
    at = AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.multiselect(key="ev_llm_strats").disabled
    assert "hyde-mrag" in at.multiselect(key="ev_llm_strats").options
    assert "hyde" not in at.multiselect(key="ev_strats").options
    assert any("need an OpenAI-compatible endpoint" in c.value and "MRAG_LLM_BASE_URL" in c.value for c in at.caption)


@pytest.mark.usefixtures("demo_indexed")  # the index exists: the run does not build one
def test_evaluation_page_llm_strategies_with_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.openai_server import FakeOpenAIServer, Reply, by_content

    sent: dict[str, int] = {"multi-query": 0, "hyde": 0}

    def answer(prompt: str) -> Reply:
        question = prompt.rsplit("Question: ", 1)[1]
        if "diverse search queries" in prompt:
            sent["multi-query"] += 30 + 8
            return Reply.ok(f"{question}\nabout {question}", prompt_tokens=30, completion_tokens=8)
        sent["hyde"] += 25 + 15
        return Reply.ok(f"{question} - this passage answers it in a few words.", prompt_tokens=25, completion_tokens=15)

    with FakeOpenAIServer(by_content(answer)) as server:
        server.set_env(monkeypatch)
        at = AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
        assert not at.exception, at.exception
        assert not at.multiselect(key="ev_llm_strats").disabled
        at.multiselect(key="ev_strats").set_value(["standard"])
        at.multiselect(key="ev_llm_strats").set_value(["multi-query", "hyde-mrag"]).run()
        assert any("Answers are cached in the database" in c.value for c in at.caption)
        at.number_input(key="ev_llm_n").set_value(2)
        at.number_input(key="ev_kmax").set_value(8)
        at.button(key="ev_start").click().run()
        assert not at.exception, at.exception
        assert not at.error, [e.value for e in at.error]
        assert any("done: 72 results" in s.value for s in at.success)
        assert len(server.requests) == 48  # 24 demo queries x (rewrites, passage)
    store = _store()
    (run,) = db.list_eval_runs(store)
    assert run.config["strategies"] == ["standard", "multi-query", "hyde-mrag"]
    assert run.config["llm"]["n_rewrites"] == 2 and run.llm_usage["total"]["spent_tokens"] == sum(sent.values())
    store.close()
    # The run view: accuracy next to tokens, equal to what the server reported.
    cost = _frame_with(at, "tokens_per_query").set_index("strategy")
    assert list(cost.index) == ["standard", "multi-query", "hyde-mrag"]
    assert cost.loc["multi-query", "tokens"] == sent["multi-query"] and cost.loc["hyde-mrag", "tokens"] == sent["hyde"]
    assert cost.loc["standard", "tokens"] == 0 and cost["weighted"].between(0, 1).all()
    assert cost.loc["multi-query", "tokens_per_query"] == pytest.approx(38)
    assert _frame_with(at, "LLM tokens")["LLM tokens"].tolist() == [sum(sent.values())]
    # Compare runs: standard vs multi-query of that run, with the cost beside the metric.
    cmp = _frame_with(at, "tokens_per_query")
    for df in at.dataframe:
        if "item" in df.value.columns and "tokens_per_query" in df.value.columns:
            cmp = df.value
    assert cmp["item"].tolist() == [f"#{run.id} standard", f"#{run.id} multi-query"]
    assert cmp["tokens"].tolist() == [0, sent["multi-query"]] and cmp["weighted"].between(0, 1).all()
    # The per-query drill-down shows the stored rewrites of the selected query and their cost.
    qid = at.selectbox(key="ev_cmp_query").value
    store = _store()
    text = db.get_query(store, qid).text
    store.close()
    assert any(c.value.startswith(f"#{run.id} multi-query: 2 LLM text(s), 38 tokens") for c in at.caption)
    assert any(df.value.columns.tolist() == ["text"] and df.value["text"].tolist() == [text, f"about {text}"]
               for df in at.dataframe)


def _demo_set_ids(store: db.Store) -> tuple[int, dict[str, int]]:
    corpus = db.list_corpora(store)[0]
    return corpus.id, {s.name: s.id for s in db.list_query_sets(store, corpus.id)}


@ON_EVERY_BACKEND
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
    assert mine.ground_truth == [pharos.id, other.id] and mine.generator == "hand-written"
    # both are lighthouses: a multi-aspect query's aspects each come from their own category
    assert (mine.status, mine.error) == ("flagged", "ground-truth documents 'Eddystone Lighthouse' and 'Pharos of "
                                         "Alexandria' share the category 'lighthouses' (each aspect should come from "
                                         "its own category)")
    assert any(s.value.startswith(f"Query #{mine.id} added to 'Mine' (flagged: ground\\-truth documents")
               for s in at.success)
    store.close()


def test_query_builder_llm_generation_flags_missing_title(monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    from tests.support.openai_server import FakeOpenAIServer, by_content

    def story(prompt: str) -> str:
        titles = re.findall(r"^Article \d+: (.+)$", prompt, flags=re.MULTILINE)
        if not titles:
            return "a sub-query\nanother sub-query\na third sub-query"  # the 3 asked for
        named = titles[:1]  # a 2-article story names only the first title -> flagged
        return ("In this long and winding story " + " and ".join(named) +
                " played the main part among many other details worth telling here.")

    with FakeOpenAIServer(by_content(story)) as server:
        server.set_env(monkeypatch)
        at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()
        assert not at.exception, at.exception
        assert not any("offline composer" in i.value for i in at.info)
        at.text_input(key="qb_gen_name").set_value("LLM")
        at.multiselect(key="qb_gen_counts").set_value([1, 2])
        at.number_input(key="qb_gen_per").set_value(1)
        at.button(key="qb_gen_start").click().run()
        assert not at.exception, at.exception
        successes = [s.value for s in at.success]
        assert "Query set ready: 1 ok, 1 flagged, 0 failed." in successes
        assert any(m.startswith("Stories are written by the LLM: model 'fake\\-model'")  # Markdown-escaped
                   for m in successes)
        assert any(e.label.startswith("#") and "flagged" in e.label and "missing titles" in e.label
                   for e in at.expander)
    store = _store()
    _, sets = _demo_set_ids(store)
    assert db.get_query_set(store, sets["LLM"]).source == "generated-llm"
    store.close()


def test_query_builder_resumes_a_stopped_generation() -> None:
    """A generation stopped after its first stored batch is listed with a Resume button; Resume writes the
    rest, and the page reruns to report it: no Stop button and no Resume row is left behind."""
    import threading

    from services.workflows import querysets as qw

    at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()  # loads the demo corpus
    assert not at.exception, at.exception
    store = _store()
    corpus_id, _ = _demo_set_ids(store)
    cancel = threading.Event()
    first = qw.generate_query_set(store, corpus_id=corpus_id, name="Stopped", aspect_counts=[1, 2], per_count=3,
                                  seed=1, want_fusion=False, batch_size=2,
                                  progress=lambda done, total: cancel.set() if done >= 2 else None, cancel=cancel)
    assert first.cancelled and first.planned == 6
    _, sets = _demo_set_ids(store)
    stored = db.get_query_set(store, sets["Stopped"]).n_queries
    assert 0 < stored < 6

    at.run()
    assert any(m.value == f"'Stopped': {stored} of 6 generated" for m in at.markdown)
    at.button(key=f"qb_resume_{sets['Stopped']}").click().run()
    assert not at.exception, at.exception
    assert [s.value for s in at.success] == ["Query set ready: " + f"{6 - stored} ok, 0 flagged, 0 failed."]
    assert db.get_query_set(store, sets["Stopped"]).n_queries == 6
    assert not [b for b in at.button if b.key.startswith(("qb_resume_", "qb_gen_stop"))]
    assert not any("generated" in m.value and "'Stopped'" in m.value for m in at.markdown)
    store.close()


def test_query_builder_offers_to_ask_again_for_failed_queries() -> None:
    """A generated set whose every plan is stored, one of them failed (the endpoint erred), is listed as unfinished
    with Resume (it was not: the failed row counted as generated); Resume replaces the failed row."""
    from services.workflows import querysets as qw

    at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()  # loads the demo corpus
    store = _store()
    corpus_id, _ = _demo_set_ids(store)
    rep = qw.generate_query_set(store, corpus_id=corpus_id, name="One failed", aspect_counts=[2], per_count=2,
                                seed=1, want_fusion=False)
    assert (rep.ok + rep.flagged, rep.planned) == (2, 2)
    victim = db.list_queries(store, rep.query_set_id)[0]
    db.update_query(store, victim.id, status="failed", error="HTTP 500: model overloaded")
    at.run()
    assert not at.exception, at.exception
    assert any(m.value == "'One failed': 1 of 2 generated (1 failed, asked again)" for m in at.markdown)
    at.button(key=f"qb_resume_{rep.query_set_id}").click().run()
    assert not at.exception, at.exception
    rows = db.list_queries(store, rep.query_set_id)
    assert len(rows) == 2 and all(q.status != "failed" for q in rows)
    assert next(q for q in rows if q.id == victim.id).text.strip()
    assert not [b for b in at.button if b.key == f"qb_resume_{rep.query_set_id}"]
    store.close()


@pytest.mark.usefixtures("demo_indexed")  # the index exists: the run does not build one
def test_evaluation_page_resumes_a_stopped_run() -> None:
    """A run stopped after its first stored batch is listed under Unfinished runs; Resume scores the rest,
    and the rerun reports it and drops the row (no Stop or Resume button left)."""
    import threading

    from services.workflows import evaluation_runs as er

    at = AppTest.from_file(EVAL_PAGE, default_timeout=60).run()  # loads the demo corpus
    assert not at.exception, at.exception
    store = _store()
    corpus_id, sets = _demo_set_ids(store)
    cancel = threading.Event()

    def stop_after_first_batch(stage: str, done: int, total: int) -> None:
        if stage == "evaluation" and done > 0:
            cancel.set()

    rid = er.run_evaluation(store, corpus_id=corpus_id, query_set_id=at.selectbox(key="ev_qs").value.id,
                            settings=RetrievalSettings(strategies=["standard", "mrag"], k_max=8), batch_size=5,
                            progress=stop_after_first_batch, cancel=cancel)
    stopped = db.get_eval_run(store, rid)
    assert stopped.status != "done" and 0 < stopped.n_results < 48

    at.run()
    assert any(m.value.startswith(f"#{rid} ") and m.value.endswith(f" - {stopped.n_results} results saved")
               for m in at.markdown)
    at.button(key=f"ev_resume_{rid}").click().run()
    assert not at.exception, at.exception
    assert f"Run #{rid} done: 48 results stored." in [s.value for s in at.success]
    assert db.get_eval_run(store, rid).status == "done"
    assert not [b for b in at.button if b.key.startswith(("ev_resume_", "ev_stop"))]
    assert not any(m.value.startswith(f"#{rid} ") and "results saved" in m.value for m in at.markdown)
    store.close()


@ON_EVERY_BACKEND
def test_query_builder_deletes_a_query_and_a_set_only_after_naming_what_goes() -> None:
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()  # loads the demo corpus and its 24 queries
    store = _store()
    corpus_id, sets = _demo_set_ids(store)
    demo_set = sets["Demo queries"]
    first, second = db.list_queries(store, demo_set)[:2]
    run = db.create_eval_run(store, corpus_id=corpus_id, query_set_id=demo_set)
    db.save_eval_results(store, run.id, [{"strategy": "standard", "query_id": q.id, "retrieved": [1], "rsr": [0.0],
                                          "csr": [0.0]} for q in (first, second)])
    assert db.runs_with_results_for(store, first.id) == [run.id]
    at.run()
    assert at.selectbox(key="qb_edit_q").value.id == first.id
    label = confirm_and_click(at, f"qb_edit_del_sure_{first.id}", f"qb_edit_del_{first.id}")
    assert label == (f"Delete query #{first.id}: its results leave 1 stored evaluation run (#{run.id}), whose "
                     "figures then cover the other queries only")
    assert not at.exception, at.exception
    assert [s.value for s in at.success] == [f"Deleted query #{first.id}."]
    assert [q.id for q in db.list_queries(store, demo_set)][:1] == [second.id]
    assert db.runs_with_results_for(store, first.id) == [] and db.runs_with_results_for(store, second.id) == [run.id]

    label = confirm_and_click(at, f"qb_del_set_sure_{demo_set}", "qb_del_set")
    assert label == ("Delete 'Demo queries' with its 23 queries and the 1 evaluation run made on it; this cannot "
                     "be undone")
    assert not at.exception, at.exception
    assert [s.value for s in at.success] == ["Deleted query set 'Demo queries'."]
    assert db.list_query_sets(store, corpus_id) == [] and db.list_eval_runs(store) == []
    store.close()


def _select_set(at: AppTest, name: str) -> None:
    """Choose the query set ``name`` in the Review & export tab."""
    box = at.selectbox(key="qb_rev_set")
    box.select_index(next(i for i, o in enumerate(box.options) if o.startswith(f"{name} ("))).run()
    assert not at.exception, at.exception


def _browser_sends(at: AppTest, key: str, label: str) -> AppTest:
    """Make select box ``key`` send ``label`` on the next run, as the browser does: it sends the text of the option
    it shows, which is the text from when the option was chosen (AppTest formats the chosen value anew)."""
    box = at.selectbox(key=key)
    if label not in box.options:
        box.options.append(label)  # an option the browser still shows, no longer among the page's
    box.set_value(label)
    return at


def _shown_set(at: AppTest) -> str:
    """The text of the chosen option of the Review & export tab's query set box."""
    box = at.selectbox(key="qb_rev_set")
    return box.options[box.index]


def _counts_line(at: AppTest) -> str:
    return next(m.value for m in at.markdown if " ok · " in m.value)


def test_query_builder_review_stays_on_its_set_after_a_query_is_deleted() -> None:
    """The set box shows "name (N queries, source)"; deleting a query changes N, and the box (and with it the
    table and the delete-set confirmation) stays on the set, not on the first one listed."""
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()  # loads the demo corpus and its 24 queries
    store = _store()
    corpus_id, sets = _demo_set_ids(store)
    doc = db.list_documents(store, corpus_id, limit=1).items[0]
    other = db.create_query_set(store, corpus_id, "hand rt2")  # newest: listed first
    db.add_queries(store, other.id, [{"text": f"About {doc.title}", "ground_truth": [doc.id]}])
    at.run()
    assert at.selectbox(key="qb_rev_set").options[0] == "hand rt2 (1 query, manual)"
    _select_set(at, "Demo queries")
    first = db.list_queries(store, sets["Demo queries"])[0]
    shown = _shown_set(at)
    assert shown == "Demo queries (24 queries, manual)"
    confirm_and_click(at, f"qb_edit_del_sure_{first.id}", f"qb_edit_del_{first.id}")
    assert not at.exception, at.exception
    assert [s.value for s in at.success] == [f"Deleted query #{first.id}."]
    _browser_sends(at, "qb_rev_set", shown).run()  # the next click: the browser still holds the old text
    assert not at.exception, at.exception
    assert _shown_set(at) == "Demo queries (23 queries, manual)"
    assert _counts_line(at) == "23 ok · 0 flagged · 0 failed"
    sure = at.checkbox(key=f"qb_del_set_sure_{sets['Demo queries']}")
    assert sure.label.startswith("Delete 'Demo queries' with its 23 queries")
    store.close()


def test_query_builder_editor_stays_on_the_edited_query() -> None:
    """The query box shows the start of the query's text; after saving a new one the editor stays on that query
    (typing in its search box reruns the page), so a second Save edits it again, not the first query of the set."""
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()
    store = _store()
    _, sets = _demo_set_ids(store)
    third = db.list_queries(store, sets["Demo queries"])[2]
    at.selectbox(key="qb_edit_q").select_index(2).run()
    assert at.selectbox(key="qb_edit_q").value.id == third.id
    at.text_area(key=f"qb_edit_text_{third.id}").set_value("Edited once: " + third.text)
    at.button(key=f"qb_edit_save_{third.id}").click().run()
    assert not at.exception, at.exception
    assert db.get_query(store, third.id).text.startswith("Edited once: ")
    at.text_input(key=f"qb_edit_search_{third.id}").set_value("Lighthouse").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="qb_edit_q").value.id == third.id
    at.text_area(key=f"qb_edit_text_{third.id}").set_value("Edited twice: " + third.text)
    at.button(key=f"qb_edit_save_{third.id}").click().run()
    assert db.get_query(store, third.id).text.startswith("Edited twice: ")
    store.close()


def test_query_builder_empty_set_says_so_instead_of_an_empty_editor() -> None:
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()
    store = _store()
    corpus_id, _ = _demo_set_ids(store)
    db.create_query_set(store, corpus_id, "Empty")
    db.create_query_set(store, corpus_id, "One")
    store.close()
    at.run()
    _select_set(at, "Empty")
    assert _shown_set(at) == "Empty (0 queries, manual)"
    assert "Edit a query" not in [h.value for h in at.subheader]
    assert any(i.value == "This query set has no query yet: write one by hand or import a query file."
               for i in at.info)
    assert at.selectbox(key="qb_rev_set").options[:2] == ["One (0 queries, manual)", "Empty (0 queries, manual)"]


def test_query_builder_hand_query_into_a_new_set_leaves_nothing_half_made() -> None:
    """'Add query' with an empty text into a new set says so and creates no set; filled in, the same click
    creates the set with its query (not 'already has a query set named ...'), and the box then offers that set."""
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()
    store = _store()
    corpus_id, before = _demo_set_ids(store)
    at.text_input(key="qb_hand_search").set_value("Eddystone").run()
    found = db.list_documents(store, corpus_id, search="Eddystone")
    shown = len(found.items)
    assert f"{found.total} match{'' if found.total == 1 else 'es'}; showing {shown}" in [c.value for c in at.caption]
    pharos = db.list_documents(store, corpus_id, search="Eddystone Lighthouse").items[0]
    at.button(key=f"qb_pick_{pharos.id}").click().run()
    at.text_input(key="qb_hand_new").set_value("hand set")
    at.button(key="qb_hand_add").click().run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == ["The query text must not be empty\\."]
    assert _demo_set_ids(store)[1] == before  # no empty set left behind
    at.text_area(key="qb_hand_text").set_value("Who built the Eddystone Lighthouse?")
    at.button(key="qb_hand_add").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    sets = _demo_set_ids(store)[1]
    (mine,) = db.list_queries(store, sets["hand set"])
    assert (mine.text, mine.ground_truth, mine.status) == ("Who built the Eddystone Lighthouse?", [pharos.id], "ok")
    assert [s.value for s in at.success] == [f"Query #{mine.id} added to 'hand set' (ok)."]
    assert at.selectbox(key="qb_hand_set").value == "hand set"  # a second query goes into the same set
    store.close()
