"""What the Evaluation Runs views say about runs of the MRAG Wikipedia benchmark's shape, on hand-made stored results
(a real SQLite store, no model): a run scores its strategies one after the other, so a run stopped part-way has
some strategies complete, one partial and the rest without results."""

from __future__ import annotations

from pathlib import Path

import pytest

import db
from services.workflows import eval_results


@pytest.fixture
def store(tmp_path: Path):
    s = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    yield s
    s.close()


def _corpus_and_queries(store: db.Store) -> tuple[db.CorpusInfo, db.QuerySetInfo, list[int]]:
    """4 documents in 2 categories; three queries of 1, 2 and 2 aspects."""
    corpus = db.create_corpus(store, "scale")
    docs = [{"title": f"d{i}", "text": f"document {i}", "label": lab} for i, lab in enumerate("aabb")]
    ids = db.add_documents(store, corpus.id, docs).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    qids = db.add_queries(store, qs.id, [{"text": "one", "ground_truth": [ids[0]]},
                                         {"text": "two", "ground_truth": [ids[0], ids[2]]},
                                         {"text": "three", "ground_truth": [ids[1], ids[3]]}])
    return corpus, qs, qids


def _stopped_run(store: db.Store, strategies: list[str], scored: dict[str, int]) -> int:
    """A stopped run asked for ``strategies`` whose stored results are, per strategy of ``scored``, its first
    ``scored[strategy]`` queries (every result found at k = 1 and 2)."""
    corpus, qs, qids = _corpus_and_queries(store)
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="stopped",
                             config={"model": "minilm", "layer": 5, "strategies": strategies, "c": 4, "k_max": 2,
                                     "w": 2.0}, seed=0)
    db.save_eval_results(store, run.id, [{"strategy": s, "query_id": q, "retrieved": [], "rsr": [1.0, 1.0],
                                          "csr": [1.0, 1.0]} for s, n in scored.items() for q in qids[:n]])
    db.finish_eval_run(store, run.id, status="cancelled")
    return run.id


def test_the_coverage_note_names_the_strategies_a_stopped_run_has_not_started(store) -> None:
    """Stopped after the first two of its three strategies: both scored every query, split none. The views showed
    two strategies and no word of the third (the note compared only the strategies with results)."""
    metrics = eval_results.load_run_metrics(
        store, _stopped_run(store, ["standard", "mrag", "split"], {"standard": 3, "mrag": 3}))
    assert metrics.strategies == ["standard", "mrag"]
    assert eval_results.coverage_note(metrics) == (
        "split scored no query yet, so it is missing from the tables, figures and exports below. Resume the run to "
        "score the rest.")


def test_the_coverage_note_names_a_partial_strategy_and_those_not_started(store) -> None:
    metrics = eval_results.load_run_metrics(store, _stopped_run(store, ["standard", "mrag", "split", "fusion"],
                                                      {"standard": 3, "mrag": 1}))
    note = eval_results.coverage_note(metrics)
    assert note is not None and "(standard 3, mrag 1)" in note
    assert note.endswith("split, fusion scored no query yet, so they are missing from the tables, figures and "
                         "exports below. Resume the run to score the rest.")


def test_a_run_whose_strategies_all_scored_every_query_has_no_coverage_note(store) -> None:
    metrics = eval_results.load_run_metrics(
        store, _stopped_run(store, ["standard", "mrag"], {"standard": 3, "mrag": 3}))
    assert eval_results.coverage_note(metrics) is None
