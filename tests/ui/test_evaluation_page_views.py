"""The Evaluation Runs page as an analyst reads it, on hand-made stored runs (AppTest, a fresh SQLite store)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402
from services.workflows import eval_results  # noqa: E402
from ui.render import md_plain  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EVAL_PAGE = str(ROOT / "pages" / "9_Evaluation_Runs.py")

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _store() -> db.Store:
    return db.open_store(os.environ["MRAG_DATABASE_URL"])


def _corpus(store: db.Store):
    """4 documents in 2 categories; q1 (1 aspect), q2 and q3 (2 aspects)."""
    corpus = db.create_corpus(store, "QA")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"document {i}", "label": lab}
                                              for i, lab in enumerate("aabb")]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    qids = db.add_queries(store, qs.id, [{"text": "one", "ground_truth": [ids[0]]},
                                         {"text": "two", "ground_truth": [ids[0], ids[2]]},
                                         {"text": "three", "ground_truth": [ids[1], ids[3]]}])
    return corpus, qs, ids, qids


def _run(store: db.Store, corpus, qs, results, strategies, status="done", config=None) -> int:
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="hand",
                             config={"model": "minilm", "layer": 5, "strategies": strategies, "c": 4, "k_max": 2,
                                     "w": 2.0, **(config or {})}, seed=0)
    db.save_eval_results(store, run.id, [{"strategy": s, "query_id": q, "retrieved": [], "rsr": rsr, "csr": csr}
                                         for (s, q), (rsr, csr) in results.items()])
    db.finish_eval_run(store, run.id, status=status)
    return run.id


def _page(corpus_id: int) -> AppTest:
    at = AppTest.from_file(EVAL_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    return at.run()


def test_a_stopped_run_without_baseline_for_an_aspect_count_shows_its_figures_and_says_it_is_partial() -> None:
    """Standard (second in the run) scored only the 1-aspect query when the run stopped: the page showed a
    KeyError traceback under 'Relative improvement' and means over different queries side by side silently."""
    store = _store()
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()  # the demo corpus first, as a first start does
    corpus, qs, _, (q1, q2, q3) = _corpus(store)
    rid = _run(store, corpus, qs, {("mrag", q1): ([1.0, 1.0], [1.0, 1.0]), ("mrag", q2): ([0.5, 1.0], [0.5, 1.0]),
                                   ("mrag", q3): ([0.0, 0.5], [0.5, 0.5]), ("standard", q1): ([0.0, 1.0], [1.0, 1.0])},
               ["mrag", "standard"], status="cancelled")
    at = _page(corpus.id)
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="ev_view_run").value == rid
    assert any(w.value.startswith(f"Run #{rid} is stopped. Its strategies scored different numbers of queries "
                                  "(mrag 3, standard 1)") for w in at.warning), [w.value for w in at.warning]
    imp = next(df.value for df in at.dataframe if "improvement" in df.value.columns)
    assert imp[["strategy", "n_aspects", "queries"]].values.tolist() == [["mrag", 1, 1]]
    assert imp.loc[0, "improvement"] == pytest.approx(2.0)  # weighted 1 vs 1/3 at k = 1


def test_a_run_stopped_before_its_last_strategy_says_which_strategy_is_missing() -> None:
    """Stopped when its first two strategies had scored every query and fusion none (how a stop of a benchmark run
    leaves it): the Runs tab showed two strategies' figures without a word of the third."""
    store = _store()
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    corpus, qs, _, qids = _corpus(store)
    rid = _run(store, corpus, qs, {(s, q): ([1.0, 1.0], [1.0, 1.0]) for s in ("standard", "mrag") for q in qids},
               ["standard", "mrag", "fusion"], status="cancelled")
    at = _page(corpus.id)
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="ev_view_run").value == rid
    assert f"Run #{rid} is stopped. fusion scored no query yet, so it is missing from the tables, figures and " \
           "exports below. Resume the run to score the rest." in [w.value for w in at.warning]


def test_a_run_whose_query_was_edited_afterwards_says_so_on_runs_and_compare() -> None:
    store = _store()
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    corpus, qs, ids, (q1, q2, q3) = _corpus(store)
    prints = {str(q.id): eval_results.query_fingerprint(q) for q in db.list_queries(store, qs.id)}
    both = {(s, q): ([1.0, 1.0], [1.0, 1.0]) for s in ("standard", "mrag") for q in (q1, q2, q3)}
    rid = _run(store, corpus, qs, both, ["standard", "mrag"], config={"queries": prints})
    db.update_query(store, q3, text="three, reworded")
    at = _page(corpus.id)
    assert not at.exception, [e.value for e in at.exception]
    expected = (f"Run #{rid}: 1 of its 3 queries (#{q3}) was edited after the run (text, ground truth or aspect "
                "count): its stored scores are those of the version the run searched. Start a new run to score the "
                "query set as it is now.")
    # once under Runs, once under Compare runs (its default items are this run's two strategies)
    assert [w.value for w in at.warning].count(expected) == 2, [w.value for w in at.warning]


def test_compare_runs_of_two_query_sets_says_why_instead_of_empty_tables() -> None:
    store = _store()
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    corpus, qs, ids, (q1, _, _) = _corpus(store)
    other = db.create_query_set(store, corpus.id, "Other *set*")
    (o1,) = db.add_queries(store, other.id, [{"text": "one", "ground_truth": [ids[0]]}])
    a = _run(store, corpus, qs, {("standard", q1): ([1.0, 1.0], [1.0, 1.0])}, ["standard"])
    b = _run(store, corpus, other, {("mrag", o1): ([1.0, 1.0], [1.0, 1.0])}, ["mrag"])
    at = _page(corpus.id)
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="ev_cmp_items").value == [(b, "mrag"), (a, "standard")]
    assert [e.value for e in at.error] == [md_plain(  # the set's name as typed, not as Markdown
        f"These runs were scored on different query sets (#{a} on 'Q', #{b} on 'Other *set*') and share no "
        "query: paired tests compare the same queries, so choose runs of one query set.")]
    assert not any("item" in df.value.columns for df in at.dataframe)  # no empty means / tests tables


def test_relative_improvement_figure_has_whole_aspect_ticks_and_the_table_percent() -> None:
    """Plotly's numeric axis put ticks at 0.5, 1.5, 2.5 aspects under the bars, and the table beside the
    figure in % showed the improvement as a fraction (0.25 next to a 25 % bar)."""
    import json

    store = _store()
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    corpus, qs, _, (q1, q2, q3) = _corpus(store)
    rid = _run(store, corpus, qs, {
        ("standard", q1): ([0.0, 1.0], [1.0, 1.0]), ("standard", q2): ([0.5, 0.5], [0.5, 0.5]),
        ("standard", q3): ([0.5, 0.5], [0.5, 0.5]), ("mrag", q1): ([1.0, 1.0], [1.0, 1.0]),
        ("mrag", q2): ([0.5, 1.0], [1.0, 1.0]), ("mrag", q3): ([0.5, 0.5], [0.5, 0.5])}, ["standard", "mrag"])
    at = _page(corpus.id)
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="ev_view_run").value == rid
    chart = next(c for c in at.get("plotly_chart") if "Relative improvement" in c.proto.spec)
    xaxis = json.loads(chart.proto.spec)["layout"]["xaxis"]
    assert (xaxis["tickmode"], xaxis["tickvals"], xaxis["ticktext"]) == ("array", [1, 2], ["1", "2"])
    # n = 1 at k = 1: mrag 1 vs standard 1/3 -> +200 %; n = 2 at k = 2: (1 + 0.5)/2 = 0.75 vs 0.5 -> +50 %.
    imp = next(df for df in at.dataframe if "improvement" in df.value.columns)
    assert imp.value["improvement"].tolist() == pytest.approx([2.0, 0.5])
    assert '"improvement"' in imp.proto.columns and '"percent"' in imp.proto.columns


def test_queries_that_all_differ_by_the_same_amount_get_no_t_test_stars() -> None:
    """mrag beat standard by exactly 0.1 (weighted at k = aspects) on every query: the t-test read that as
    t = inf, p = 0, '***'. It has no variance to test: no p-value, no stars, a note; Wilcoxon still answers."""
    store = _store()
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    corpus, qs, _, (q1, q2, q3) = _corpus(store)
    # weighted = (2 rsr + csr) / 3: q1 at k = 1 0 vs 0.1, q2 at k = 2 0.5 vs 0.6, q3 at k = 2 0.2 vs 0.3.
    rid = _run(store, corpus, qs, {
        ("standard", q1): ([0.0, 0.0], [0.0, 0.0]), ("mrag", q1): ([0.0, 0.0], [0.3, 0.3]),
        ("standard", q2): ([0.5, 0.5], [0.5, 0.5]), ("mrag", q2): ([0.5, 0.5], [0.5, 0.8]),
        ("standard", q3): ([0.0, 0.0], [0.6, 0.6]), ("mrag", q3): ([0.0, 0.0], [0.9, 0.9])}, ["standard", "mrag"])
    at = _page(corpus.id)
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="ev_cmp_items").value == [(rid, "standard"), (rid, "mrag")]
    tests = next(df.value for df in at.dataframe if "t_sig" in df.value.columns).set_index("n_aspects")
    assert tests["mean_diff"].tolist() == ["+0.100", "+0.100", "+0.100"]
    assert tests["t_sig"].tolist() == ["", "", ""] and tests["t_p"].isna().all()
    assert tests.loc["1", "note"] == "fewer than 2 paired queries: no test"
    for n in ("2", "all"):
        assert tests.loc[n, "note"].startswith("every query differs by the same amount (+0.100): the t-test has no "
                                               "variance to test")
    # Wilcoxon: all ranks positive, W- = 0; exact two-sided p = 2 / 2^n: 0.5 for 2 queries, 0.25 for 3.
    assert tests.loc["2", "wilcoxon_p"] == pytest.approx(0.5) and tests.loc["all", "wilcoxon_p"] == pytest.approx(0.25)
    assert tests["wilcoxon_sig"].tolist() == ["", "n.s.", "n.s."]
    assert tests.loc["all", ["wins", "ties", "losses"]].tolist() == [3, 0, 0]


def test_the_cost_table_marks_shared_expansions_and_totals_each_call_once() -> None:
    store = _store()
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    corpus, qs, _, (q1, q2, _) = _corpus(store)
    strategies = ["multi-query", "multi-query-mrag"]
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="llm",
                             config={"model": "minilm", "layer": 5, "strategies": strategies, "c": 4, "k_max": 2,
                                     "w": 2.0}, seed=0)
    llm = {q: {"llm": {"family": "multi-query", "texts": ["t"], "prompt_tokens": p, "completion_tokens": 10,
                       "latency_s": 0.25, "cached": False}} for q, p in ((q1, 40), (q2, 30))}
    db.save_eval_results(store, run.id, [{"strategy": s, "query_id": q, "retrieved": [], "rsr": [1.0, 1.0],
                                          "csr": [1.0, 1.0], "details": llm[q]} for s in strategies for q in (q1, q2)])
    db.finish_eval_run(store, run.id)
    at = _page(corpus.id)
    assert not at.exception, [e.value for e in at.exception]
    cost = next(df.value for df in at.dataframe if "search_s" in df.value.columns).set_index("strategy")
    # Each row: the 50 + 40 tokens its strategy searched; the run sent them once (one call per query).
    assert cost.loc[strategies, ["tokens", "spent_tokens", "shared_with"]].values.tolist() == [
        [90, 90, "multi-query-mrag"], [90, 90, "multi-query"]]
    assert any(c.value.startswith("All LLM-assisted strategies together, each LLM call counted once: 90 tokens over "
                                  "2 expansions, 90 spent, 0.50 LLM s. multi-query and multi-query-mrag share their "
                                  "LLM expansions") for c in at.caption), [c.value for c in at.caption]


def test_the_runs_table_counts_the_llm_tokens_of_each_call_once_after_a_resume() -> None:
    """A run stopped after its first strategy and resumed: the resume's expansions came from the cache, and the
    sessions' llm_usage totals (kept as the workflow stores them) count them twice; the table counts them once."""
    store = _store()
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()
    corpus, qs, _, (q1, q2, q3) = _corpus(store)
    strategies = ["hyde", "hyde-mrag"]
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="llm",
                             config={"model": "minilm", "layer": 5, "strategies": strategies, "c": 4, "k_max": 2,
                                     "w": 2.0}, seed=0)

    def result(s: str, q: int, cached: bool) -> dict:
        llm = {"family": "hyde", "texts": ["t"], "prompt_tokens": 30, "completion_tokens": 20,
               "latency_s": 0.0 if cached else 0.5, "cached": cached}
        return {"strategy": s, "query_id": q, "retrieved": [], "rsr": [1.0, 1.0], "csr": [1.0, 1.0],
                "details": {"llm": llm}}

    # session 1 sent the 3 passages (150 tokens) and stored hyde's results; the resume got them from the cache
    db.save_eval_results(store, run.id, [result("hyde", q, False) for q in (q1, q2, q3)])
    session1 = {"tokens": 150, "spent_tokens": 150, "expansions": 3, "cached": 0}
    db.finish_eval_run(store, run.id, status="cancelled", llm_usage={"total": session1})
    db.save_eval_results(store, run.id, [result("hyde-mrag", q, True) for q in (q1, q2, q3)])
    both = {"tokens": 300, "spent_tokens": 150, "expansions": 6, "cached": 3}
    db.finish_eval_run(store, run.id, llm_usage={"total": both})
    at = _page(corpus.id)
    assert not at.exception, [e.value for e in at.exception]
    runs = next(df.value for df in at.dataframe if "LLM tokens" in df.value.columns).set_index("id")
    assert runs.loc[run.id, "LLM tokens"] == 150  # 3 calls x 50 tokens, each once (not the sessions' 300)
