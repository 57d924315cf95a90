"""Comparing runs scored with different k_max (Evaluation Runs, Compare runs tab): every item is read at the same k.

Found on the MRAG Wikipedia benchmark: the same MRAG retrieval stored twice, once with k_max 32 and once with k_max
10, compared at k = number of aspects, read the 25-aspect queries at k = 25 in one run and k = 10 in the other and
reported a difference of -0.085 (p = 1e-10) between two identical retrievals."""

from __future__ import annotations

from pathlib import Path

import pytest

import db
from services.workflows import eval_comparison, eval_results


@pytest.fixture
def store(tmp_path: Path):
    s = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    yield s
    s.close()


# One 3-aspect query; RSR at k = 1..3 is 1/3, 2/3, 1 and CSR 1/3, 2/3, 1 (one more document per k).
RSR = [1 / 3, 2 / 3, 1.0]


def _runs(store: db.Store) -> tuple[int, int]:
    """The same retrieval stored by a run of k_max 3 and one of k_max 2 (its results end at k = 2)."""
    corpus = db.create_corpus(store, "K")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"document {i}", "label": lab}
                                              for i, lab in enumerate("abc")]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    (qid,) = db.add_queries(store, qs.id, [{"text": "three things", "ground_truth": ids}])
    runs = []
    for k_max in (3, 2):
        run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name=f"k{k_max}",
                                 config={"model": "minilm", "layer": 5, "strategies": ["mrag"], "c": 3,
                                         "k_max": k_max, "w": 2.0}, seed=0)
        db.save_eval_results(store, run.id, [{"strategy": "mrag", "query_id": qid, "retrieved": ids[:k_max],
                                              "rsr": RSR[:k_max], "csr": RSR[:k_max]}])
        db.finish_eval_run(store, run.id, status="done")
        runs.append(run.id)
    return runs[0], runs[1]


def test_runs_of_different_k_max_are_compared_at_the_k_both_scored(store) -> None:
    long_run, short_run = _runs(store)
    items = [(long_run, "mrag"), (short_run, "mrag")]
    means, tests = eval_comparison.compare_runs(store, items)  # k = 3 aspects, but the short run stops at k = 2
    both = means[means["n_aspects"] == "3"].set_index("item")["weighted"]
    assert both[f"#{long_run} mrag"] == pytest.approx(2 / 3) == both[f"#{short_run} mrag"]  # both at k = 2
    row = tests[tests["n_aspects"] == "3"].iloc[0]
    assert (row["mean_diff"], row["wins"], row["ties"], row["losses"]) == (0.0, 0, 1, 0)
    pq = eval_comparison.per_query_comparison(store, items, k=3)
    assert pq[[f"#{long_run} mrag", f"#{short_run} mrag"]].values.tolist() == [[pytest.approx(2 / 3)] * 2]


def test_the_compare_note_says_which_runs_stop_at_a_smaller_k(store) -> None:
    long_run, short_run = _runs(store)
    loaded = {rid: eval_results.load_run_metrics(store, rid) for rid in (long_run, short_run)}
    assert eval_comparison.shared_k_max(loaded.values()) == 2
    assert eval_comparison.compare_k_note(loaded, None) == (
        f"These runs scored different ranges of k (#{long_run} k = 1..3, #{short_run} k = 1..2): every item is read "
        "at k = the number of aspects, but at most k = 2, the largest k all of them scored, so each pair is compared "
        "at the same k.")
    assert eval_comparison.compare_k_note(loaded, 2) is None  # nothing is lowered
    assert eval_comparison.compare_k_note({long_run: loaded[long_run]}, None) is None


def test_the_weighted_ratio_of_runs_with_different_w_is_said_not_to_compare(store) -> None:
    long_run, short_run = _runs(store)
    corpus_id = db.get_eval_run(store, long_run).corpus_id
    qs_id = db.get_eval_run(store, long_run).query_set_id
    (qid,) = [q.id for q in db.list_queries(store, qs_id)]
    run = db.create_eval_run(store, corpus_id=corpus_id, query_set_id=qs_id, name="w1",
                             config={"model": "minilm", "layer": 5, "strategies": ["mrag"], "c": 3, "k_max": 3,
                                     "w": 1.0}, seed=0)
    db.save_eval_results(store, run.id, [{"strategy": "mrag", "query_id": qid, "retrieved": [], "rsr": [0.0, 0.0, 1.0],
                                          "csr": [1.0, 1.0, 1.0]}])
    loaded = {rid: eval_results.load_run_metrics(store, rid) for rid in (long_run, run.id)}
    assert loaded[run.id].per_query["weighted"].tolist() == [0.5, 0.5, 1.0]  # (1·RSR + CSR) / 2
    assert eval_comparison.compare_w_note(loaded, "weighted") == (
        f"These runs weight exact hits differently (#{long_run} w = 2, #{run.id} w = 1): each weighted ratio is "
        "(w·RSR + CSR) / (w + 1) with its run's w, so their weighted ratios do not compare. Compare rsr or csr "
        "instead.")
    assert eval_comparison.compare_w_note(loaded, "rsr") is None
    both = {rid: eval_results.load_run_metrics(store, rid) for rid in (long_run, short_run)}
    assert eval_comparison.compare_w_note(both, "weighted") is None
