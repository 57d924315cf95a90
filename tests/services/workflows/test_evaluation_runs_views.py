"""QA of the Evaluation Runs views on hand-made stored results (a real SQLite store, no model): every number
below is worked out by hand from the stored per-query values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import db
from mrag_core.settings import RetrievalSettings
from services.workflows import eval_comparison, eval_costs, eval_exports, eval_results
from services.workflows import evaluation_runs as er


@pytest.fixture
def store(tmp_path: Path):
    s = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    yield s
    s.close()


def make_corpus(store: db.Store):
    """4 documents in 2 categories; queries q1 (1 aspect), q2 and q3 (2 aspects)."""
    corpus = db.create_corpus(store, "QA")
    docs = [{"title": f"d{i}", "text": f"document {i}", "label": lab} for i, lab in enumerate("aabb")]
    ids = db.add_documents(store, corpus.id, docs).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    qids = db.add_queries(store, qs.id, [
        {"text": "one", "ground_truth": [ids[0]]},
        {"text": "two", "ground_truth": [ids[0], ids[2]]},
        {"text": "three", "ground_truth": [ids[1], ids[3]]},
    ])
    return corpus, qs, ids, qids


def make_run(store: db.Store, corpus, qs, results: dict[tuple[str, int], tuple[list[float], list[float]]],
             strategies: list[str], status: str = "done", k_max: int = 2, config: dict | None = None) -> int:
    """A run of ``strategies`` whose stored (strategy, query) results are ``results``: (rsr per k, csr per k)."""
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="hand",
                             config={"model": "minilm", "layer": 5, "strategies": strategies, "c": 4,
                                     "k_max": k_max, "w": 2.0, **(config or {})}, seed=0)
    db.save_eval_results(store, run.id, [
        {"strategy": s, "query_id": q, "retrieved": [], "rsr": rsr, "csr": csr}
        for (s, q), (rsr, csr) in results.items()])
    db.finish_eval_run(store, run.id, status=status)
    return run.id


def test_relative_improvement_of_a_stopped_run_pairs_queries_and_skips_missing_aspects(store) -> None:
    """A run stopped while its second strategy (standard, the baseline) had scored only the 1-aspect query:
    the Runs tab raised KeyError 'standard' (a traceback) for the 2-aspect group."""
    corpus, qs, _, (q1, q2, q3) = make_corpus(store)
    rid = make_run(store, corpus, qs, {
        ("mrag", q1): ([1.0, 1.0], [1.0, 1.0]),
        ("mrag", q2): ([0.5, 1.0], [0.5, 1.0]),
        ("mrag", q3): ([0.0, 0.5], [0.5, 0.5]),
        ("standard", q1): ([0.0, 1.0], [1.0, 1.0]),
    }, ["mrag", "standard"], status="cancelled")
    imp = eval_results.relative_improvement(eval_results.load_run_metrics(store, rid))
    # Only n = 1 has a baseline: at k = 1 mrag's weighted (2*1 + 1)/3 = 1, standard's (2*0 + 1)/3 = 1/3.
    assert imp[["strategy", "n_aspects", "k", "queries"]].values.tolist() == [["mrag", 1, 1, 1]]
    assert imp.loc[0, "weighted"] == pytest.approx(1.0)
    assert imp.loc[0, "baseline"] == pytest.approx(1 / 3)
    assert imp.loc[0, "improvement"] == pytest.approx(2.0)


def test_relative_improvement_is_over_the_queries_both_strategies_scored(store) -> None:
    corpus, qs, _, (q1, q2, q3) = make_corpus(store)
    rid = make_run(store, corpus, qs, {
        ("standard", q1): ([1.0, 1.0], [1.0, 1.0]),
        ("standard", q2): ([0.5, 0.5], [0.5, 0.5]),  # weighted at k=2: 0.5
        ("mrag", q1): ([1.0, 1.0], [1.0, 1.0]),
        ("mrag", q2): ([0.5, 1.0], [1.0, 1.0]),  # weighted at k=2: 1.0
        ("mrag", q3): ([0.0, 0.0], [0.0, 0.0]),  # not scored by standard (stopped run): left out
    }, ["standard", "mrag"], status="cancelled")
    imp = eval_results.relative_improvement(eval_results.load_run_metrics(store, rid)).set_index("n_aspects")
    assert imp.loc[2, "queries"] == 1
    assert (imp.loc[2, "weighted"], imp.loc[2, "baseline"]) == (pytest.approx(1.0), pytest.approx(0.5))
    assert imp.loc[2, "improvement"] == pytest.approx(1.0)  # +100 %, not (0.5 / 0.5 - 1) = 0 over q2 and q3


def test_coverage_note_names_each_strategys_query_count_for_a_stopped_run(store) -> None:
    corpus, qs, _, (q1, q2, q3) = make_corpus(store)
    full = {("standard", q): ([1.0, 1.0], [1.0, 1.0]) for q in (q1, q2, q3)}
    rid = make_run(store, corpus, qs, {**full, ("mrag", q1): ([1.0, 1.0], [1.0, 1.0])}, ["standard", "mrag"],
                   status="cancelled")
    note = eval_results.coverage_note(eval_results.load_run_metrics(store, rid))
    assert note is not None and "(standard 3, mrag 1)" in note
    done = make_run(store, corpus, qs, {**full, **{("mrag", q): v for (_, q), v in full.items()}},
                    ["standard", "mrag"])
    assert eval_results.coverage_note(eval_results.load_run_metrics(store, done)) is None


@pytest.fixture(scope="module")
def lm():
    import torch

    from mrag_core.models.loader import load_model

    torch.set_num_threads(1)
    return load_model("minilm")


def test_a_query_edited_after_the_run_is_named_and_keeps_the_aspect_count_it_was_scored_with(
        store, lm, tmp_path, monkeypatch) -> None:
    """The run scored q2 with 2 ground-truth documents; the user then cut its ground truth to one (1 aspect).
    The views grouped q2's stored 2-aspect scores with the 1-aspect queries, read at k = 1, and nothing said
    that the stored scores were of another version of the query."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    corpus, qs, ids, (q1, q2, q3) = make_corpus(store)
    rid = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                            settings=RetrievalSettings(strategies=["standard"], c=4, k_max=2), lm=lm)
    before = eval_results.load_run_metrics(store, rid)
    assert before.edited == [] and eval_results.edited_note(before) is None
    stored = {r.query_id: r for r in db.load_eval_results(store, rid)}
    db.update_query(store, q2, ground_truth=[ids[0]], n_aspects=1)
    m = eval_results.load_run_metrics(store, rid)
    assert m.edited == [q2]
    assert dict(zip(m.queries["query_id"], m.queries["n_aspects"])) == {q1: 1, q2: 2, q3: 2}
    # The 2-aspect mean at k = 2 is still over q2 and q3 as stored (not q3 alone).
    at = m.summary[(m.summary["n_aspects"] == 2) & (m.summary["k"] == 2)].iloc[0]
    assert at["n_queries"] == 2
    assert at["rsr"] == pytest.approx((stored[q2].rsr[1] + stored[q3].rsr[1]) / 2)
    layout = json.loads(eval_exports.authors_json(m))
    assert len(layout["standard"]["1"]["success_ratio"][0]) == 1  # q1 only
    assert len(layout["standard"]["2"]["success_ratio"][0]) == 2
    note = eval_results.edited_note(m)
    assert note == (f"Run #{rid}: 1 of its 3 queries (#{q2}) was edited after the run (text, ground truth or aspect "
                    "count): its stored scores are those of the version the run searched. Start a new run to score "
                    "the query set as it is now.")


def test_runs_of_different_query_sets_are_not_compared(store) -> None:
    """Compare runs offered runs of every query set of the corpus; two of different sets gave empty tables, NaN
    means and 'share no scored query (different query sets?)'. Now compare_runs refuses, naming both sets."""
    corpus, qs, ids, (q1, _, _) = make_corpus(store)
    other = db.create_query_set(store, corpus.id, "Other")
    (o1,) = db.add_queries(store, other.id, [{"text": "one", "ground_truth": [ids[0]]}])
    a = make_run(store, corpus, qs, {("standard", q1): ([1.0, 1.0], [1.0, 1.0])}, ["standard"])
    b = make_run(store, corpus, other, {("mrag", o1): ([1.0, 1.0], [1.0, 1.0])}, ["mrag"])
    with pytest.raises(eval_results.EvaluationInputError) as exc:
        eval_comparison.compare_runs(store, [(a, "standard"), (b, "mrag")])
    assert str(exc.value) == (f"These runs were scored on different query sets (#{a} on 'Q', #{b} on 'Other') and "
                              "share no query: paired tests compare the same queries, so choose runs of one query set.")


def _llm(family: str, prompt: int, completion: int, latency: float, cached: bool) -> dict:
    return {"llm": {"family": family, "texts": ["t"], "prompt_tokens": prompt, "completion_tokens": completion,
                    "latency_s": latency, "cached": cached}}


def test_expansions_shared_by_two_strategies_are_marked_and_counted_once_in_the_total(store) -> None:
    """multi-query and multi-query-mrag search the same rewrites (one LLM call per query serves both): the cost
    table charged the calls to each, and a sum over its rows counted them twice."""
    corpus, qs, _, (q1, q2, _) = make_corpus(store)
    details = {  # q1: one call for both; q2: multi-query's call, multi-query-mrag (a later session) from the cache
        ("multi-query", q1): _llm("multi-query", 40, 12, 0.5, False),
        ("multi-query-mrag", q1): _llm("multi-query", 40, 12, 0.5, False),
        ("multi-query", q2): _llm("multi-query", 30, 10, 0.4, False),
        ("multi-query-mrag", q2): _llm("multi-query", 30, 10, 0.0, True),
        ("hyde", q1): _llm("hyde", 20, 30, 1.0, False),
        ("hyde", q2): _llm("hyde", 20, 25, 0.0, True),
    }
    strategies = ["standard", "multi-query", "multi-query-mrag", "hyde"]
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="llm",
                             config={"model": "minilm", "layer": 5, "strategies": strategies, "c": 4, "k_max": 2,
                                     "w": 2.0}, seed=0)
    db.save_eval_results(store, run.id, [
        {"strategy": s, "query_id": q, "retrieved": [], "rsr": [1.0, 1.0], "csr": [1.0, 1.0],
         "details": details.get((s, q))} for s in strategies for q in (q1, q2)])
    db.finish_eval_run(store, run.id)
    m = eval_results.load_run_metrics(store, run.id)
    table = eval_costs.accuracy_and_cost(m).set_index("strategy")
    cols = ["llm_queries", "tokens", "spent_tokens", "cached", eval_costs.SHARED_COLUMN]
    # Per strategy: what it searched. multi-query 52 + 40 = 92 tokens, all sent; multi-query-mrag the same 92,
    # 52 sent (q2 from the cache); hyde 50 + 45 = 95, 50 sent.
    assert table.loc["multi-query", cols].tolist() == [2, 92, 92, 0, "multi-query-mrag"]
    assert table.loc["multi-query-mrag", cols].tolist() == [2, 92, 52, 1, "multi-query"]
    assert table.loc["hyde", cols].tolist() == [2, 95, 50, 1, ""]
    assert table.loc["standard", cols].tolist() == [0, 0, 0, 0, ""]
    assert table["tokens"].sum() == 279  # the rows added up count the shared rewrites twice
    # Each (family, query) expansion once, the sent call kept: 92 + 95 = 187 tokens over 4 expansions;
    # sent 52 + 40 + 50 = 142; LLM seconds 0.5 + 0.4 + 1.0; hyde's q2 the one cache hit.
    total = eval_costs.llm_cost_total(m)
    assert {k: total[k] for k in ("llm_queries", "tokens", "spent_tokens", "cached", "failed")} == {
        "llm_queries": 4, "tokens": 187, "spent_tokens": 142, "cached": 1, "failed": 0}
    assert total["llm_s"] == pytest.approx(1.9) and total["tokens_per_query"] == pytest.approx(187 / 4)
    shared = ("multi-query and multi-query-mrag share their LLM expansions (one call per query serves both "
              "strategies): each of their rows counts those calls, so a sum of the rows counts them twice; the total "
              "counts each call once.")
    assert eval_costs.shared_expansions_note(m.strategies) == shared
    assert eval_costs.llm_total_note(m) == (
        "All LLM-assisted strategies together, each LLM call counted once: 187 tokens over 4 expansions, 142 spent, "
        f"1.90 LLM s. {shared}")
    assert eval_costs.shared_expansions_note(["hyde", "multi-query", "standard"]) is None
    assert eval_costs.shared_expansions_note(["hyde-mrag", "multi-query", "hyde", "multi-query-mrag"]).startswith(
        "multi-query and multi-query-mrag share their LLM expansions, as do hyde-mrag and hyde (one call")
    cost = eval_costs.items_cost(store, [(run.id, "multi-query-mrag"), (run.id, "hyde")])
    assert cost[["item", "tokens", eval_costs.SHARED_COLUMN]].values.tolist() == [
        [f"#{run.id} multi-query-mrag", 92, "multi-query"], [f"#{run.id} hyde", 95, ""]]
    free = eval_costs.without_unused_cost(table.loc[["standard"]].reset_index())
    assert list(free.columns) == ["strategy", "rsr", "csr", "weighted", "search_s"]
