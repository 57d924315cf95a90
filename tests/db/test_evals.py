"""Evaluation runs and per-query results (resumable, upsert-safe)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import db
from db import Store


@pytest.fixture
def setup(store: Store, corpus: db.CorpusInfo, docs: list[int]) -> tuple[int, list[int], int]:
    qs = db.create_query_set(store, corpus.id, "eval set")
    queries = db.add_queries(store, qs.id, [{"text": f"q{i}", "ground_truth": docs[i : i + 2]} for i in range(3)])
    run = db.create_embedding_run(
        store, corpus.id, model_name="m", layer=0, pooling="last", n_heads=1, head_dim=2, dim=2
    )
    return qs.id, queries, run.id


def _result(strategy: str, qid: int, k: int = 3, value: float = 0.5) -> dict[str, object]:
    return {
        "strategy": strategy,
        "query_id": qid,
        "retrieved": np.arange(k),  # numpy input is accepted
        "rsr": [value] * k,
        "csr": np.full(k, value),
    }


def test_eval_run_round_trip(
    store: Store, corpus: db.CorpusInfo, setup: tuple[int, list[int], int],
) -> None:
    qs_id, queries, emb_id = setup
    config = {"strategies": ["standard", "mrag"], "c": 1, "k_max": 3, "voting": "exp", "w": 0.5}
    run = db.create_eval_run(
        store, corpus_id=corpus.id, query_set_id=qs_id, embedding_run_id=emb_id,
        name="first", config=config, seed=7,
    )
    assert (run.status, run.config, run.seed, run.n_results, run.finished_at) == ("running", config, 7, 0, None)

    saved = db.save_eval_results(
        store, run.id,
        [_result("standard", q) for q in queries[:2]] + [{**_result("mrag", queries[0]), "details": {"heads": [1, 4]}}],
    )
    assert saved == 3
    assert db.completed_queries(store, run.id, "standard") == set(queries[:2])
    assert db.completed_queries(store, run.id, "mrag") == {queries[0]}
    rows = db.load_eval_results(store, run.id)
    assert [(r.strategy, r.query_id) for r in rows] == [
        ("mrag", queries[0]), ("standard", queries[0]), ("standard", queries[1]),
    ]
    assert (rows[0].retrieved, rows[0].rsr, rows[0].csr, rows[0].details) == (
        [0, 1, 2],
        [0.5] * 3,
        [0.5] * 3,
        {"heads": [1, 4]},
    )
    assert rows[1].details is None
    assert len(db.load_eval_results(store, run.id, strategy="standard")) == 2

    done = db.finish_eval_run(store, run.id, timing={"retrieval_s": 1.0}, llm_usage={"prompt_tokens": 10})
    done = db.finish_eval_run(store, run.id, timing={"total_s": 2.0})
    assert (done.status, done.n_results) == ("done", 3) and done.finished_at is not None
    assert done.timing == {"retrieval_s": 1.0, "total_s": 2.0} and done.llm_usage == {"prompt_tokens": 10}
    assert db.get_eval_run(store, run.id) == done


def test_resaving_results_replaces_them(
    store: Store, corpus: db.CorpusInfo, setup: tuple[int, list[int], int],
    count_rows: Callable[[str], int],
) -> None:
    qs_id, queries, _ = setup
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs_id)
    db.save_eval_results(store, run.id, [_result("s", q, value=0.1) for q in queries[:2]])
    # Resume re-does the batch plus one more query.
    db.save_eval_results(store, run.id, [_result("s", q, value=0.9) for q in queries])
    assert count_rows("eval_results") == 3
    assert [r.rsr[0] for r in db.load_eval_results(store, run.id)] == [0.9, 0.9, 0.9]


def test_result_validation(
    store: Store, corpus: db.CorpusInfo, setup: tuple[int, list[int], int],
    count_rows: Callable[[str], int],
) -> None:
    qs_id, queries, _ = setup
    other_set = db.create_query_set(store, corpus.id, "other")
    (foreign_q,) = db.add_queries(store, other_set.id, [{"text": "x"}])
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs_id)
    with pytest.raises(db.InvalidInputError, match="not in this run's query set"):
        db.save_eval_results(store, run.id, [_result("s", queries[0]), _result("s", foreign_q)])
    with pytest.raises(db.InvalidInputError, match="repeats"):
        db.save_eval_results(store, run.id, [_result("s", queries[0]), _result("s", queries[0])])
    with pytest.raises(db.InvalidInputError, match="malformed"):
        db.save_eval_results(store, run.id, [{"strategy": "s", "query_id": queries[0]}])
    assert count_rows("eval_results") == 0
    with pytest.raises(db.InvalidInputError):
        db.finish_eval_run(store, run.id, status="great")


def test_run_must_match_its_corpus(
    store: Store, corpus: db.CorpusInfo, setup: tuple[int, list[int], int],
) -> None:
    qs_id, _, emb_id = setup
    other = db.create_corpus(store, "Other")
    other_qs = db.create_query_set(store, other.id, "q")
    with pytest.raises(db.InvalidInputError, match="Query set"):
        db.create_eval_run(store, corpus_id=corpus.id, query_set_id=other_qs.id)
    with pytest.raises(db.InvalidInputError, match="Embedding run"):
        db.create_eval_run(store, corpus_id=other.id, query_set_id=other_qs.id, embedding_run_id=emb_id)
    with pytest.raises(db.NotFoundError):
        db.create_eval_run(store, corpus_id=corpus.id, query_set_id=999)
    # The index a run searched is recorded afterwards, and must be of the run's corpus too.
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs_id)
    assert db.link_eval_index(store, run.id, emb_id).embedding_run_id == emb_id
    other_index = db.create_embedding_run(store, other.id, model_name="m", layer=0, pooling="last", n_heads=1,
                                          head_dim=2, dim=2)
    with pytest.raises(db.InvalidInputError, match="another corpus"):
        db.link_eval_index(store, run.id, other_index.id)
    assert db.get_eval_run(store, run.id).embedding_run_id == emb_id


def test_listing_and_deleting_runs(
    store: Store, corpus: db.CorpusInfo, setup: tuple[int, list[int], int],
    count_rows: Callable[[str], int],
) -> None:
    qs_id, queries, emb_id = setup
    r1 = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs_id, embedding_run_id=emb_id)
    r2 = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs_id)
    assert [r.id for r in db.list_eval_runs(store, corpus_id=corpus.id)] == [r2.id, r1.id]
    assert [r.id for r in db.list_eval_runs(store, query_set_id=qs_id)] == [r2.id, r1.id]
    assert db.list_eval_runs(store, corpus_id=999) == []

    db.delete_embedding_run(store, emb_id)  # evaluation survives, link is cleared
    assert db.get_eval_run(store, r1.id).embedding_run_id is None

    db.save_eval_results(store, r1.id, [_result("s", queries[0])])
    db.delete_eval_run(store, r1.id)
    assert count_rows("eval_results") == 0
    assert [r.id for r in db.list_eval_runs(store)] == [r2.id]
    with pytest.raises(db.NotFoundError):
        db.get_eval_run(store, r1.id)


def test_fingerprints_are_recorded_with_their_batch_and_a_changed_one_drops_the_older_results(
    store: Store, corpus: db.CorpusInfo, setup: tuple[int, list[int], int],
    count_rows: Callable[[str], int],
) -> None:
    """A resumed run re-scores a query edited since it was scored: the batch that does so records the new
    fingerprint and drops the query's results of the other strategies (they scored the old text) in the same
    transaction, so a stop between the strategies never leaves an old result under a new fingerprint."""
    qs_id, (q0, q1, q2), _ = setup
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs_id,
                             config={"k_max": 3, "queries": {str(q0): "2:old0", str(q1): "2:old1"}})
    db.save_eval_results(store, run.id, [_result("a", q0), _result("a", q1)],
                         fingerprints={q0: "2:old0", q1: "2:old1"})
    db.save_eval_results(store, run.id, [_result("b", q0)], fingerprints={q0: "2:old0"})
    assert db.get_eval_run(store, run.id).config["queries"] == {str(q0): "2:old0", str(q1): "2:old1"}
    assert count_rows("eval_results") == 3

    # q0 edited: strategy a scores it again, and q2 (new to the run) for the first time.
    db.save_eval_results(store, run.id, [_result("a", q0, value=0.9), _result("a", q2)],
                         fingerprints={q0: "1:new0", q2: "2:new2"})
    info = db.get_eval_run(store, run.id)
    assert info.config == {"k_max": 3, "queries": {str(q0): "1:new0", str(q1): "2:old1", str(q2): "2:new2"}}
    assert [(r.strategy, r.query_id, r.rsr[0]) for r in db.load_eval_results(store, run.id)] == [
        ("a", q0, 0.9), ("a", q1, 0.5), ("a", q2, 0.5)]  # b's q0 scored the old text: gone
    assert db.completed_queries(store, run.id, "b") == set()

    # The same fingerprint again drops nothing; a fingerprint of a query outside the batch writes nothing.
    db.save_eval_results(store, run.id, [_result("b", q0, value=0.7)], fingerprints={q0: "1:new0"})
    assert count_rows("eval_results") == 4
    with pytest.raises(db.InvalidInputError, match=f"Query {q1} has a fingerprint but no result"):
        db.save_eval_results(store, run.id, [_result("b", q2)], fingerprints={q2: "2:x", q1: "2:y"})
    assert db.get_eval_run(store, run.id).config == info.config and count_rows("eval_results") == 4


def _claimed_one_query_run(store) -> db.EvalRunInfo:
    """A run over a one-document corpus and a one-query set, claimed by owner 'a pid 1 #a'."""
    corpus = db.create_corpus(store, "C")
    docs = db.add_documents(store, corpus.id, [{"title": "a", "text": "x"}]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    db.add_queries(store, qs.id, [{"text": "q", "ground_truth": docs}])
    return db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, owner="a pid 1 #a")


def test_a_resume_claim_refuses_a_finished_run_and_changes_nothing(store) -> None:
    run = _claimed_one_query_run(store)
    done = db.finish_eval_run(store, run.id, status="done", owner="a pid 1 #a")
    with pytest.raises(db.InvalidInputError, match=f"Evaluation run {run.id} is finished"):
        db.claim_eval_run(store, run.id, "b pid 2 #b", unfinished_only=True)
    assert db.get_eval_run(store, run.id) == done
    claimed = db.claim_eval_run(store, run.id, "b pid 2 #b")  # a claim that is no resume may take it
    assert (claimed.status, claimed.owner) == ("running", "b pid 2 #b")
    db.finish_eval_run(store, run.id, status="cancelled", owner="b pid 2 #b")
    resumed = db.claim_eval_run(store, run.id, "c pid 3 #c", unfinished_only=True)  # a stopped run resumes
    assert (resumed.status, resumed.owner) == ("running", "c pid 3 #c")


def test_usage_recorded_while_a_run_runs_merges_and_only_for_the_runs_claim(store) -> None:
    run = _claimed_one_query_run(store)
    assert db.record_eval_usage(store, run.id, {"total": {"spent_tokens": 50}, "model": "m"}, owner="a pid 1 #a")
    assert db.record_eval_usage(store, run.id, {"total": {"spent_tokens": 120}}, owner="a pid 1 #a")
    info = db.get_eval_run(store, run.id)
    assert info.llm_usage == {"total": {"spent_tokens": 120}, "model": "m"} and info.status == "running"
    db.finish_eval_run(store, run.id, status="cancelled", owner="a pid 1 #a")
    db.claim_eval_run(store, run.id, "b pid 2 #b")  # another process resumed the run: the old claim writes nothing
    assert not db.record_eval_usage(store, run.id, {"total": {"spent_tokens": 999}}, owner="a pid 1 #a")
    assert db.get_eval_run(store, run.id).llm_usage == info.llm_usage
    with pytest.raises(db.NotFoundError):
        db.record_eval_usage(store, run.id + 1, {})


def test_eval_llm_records_is_exported_and_reads_the_llm_details_of_each_run(
    store: Store, corpus: db.CorpusInfo, setup: tuple[int, list[int], int],
) -> None:
    """db exports eval_llm_records (and lists it in __all__) like every other store function: per run, the
    (strategy, query, details["llm"]) of its results that have one; results without it and runs without any are
    left out."""
    assert "eval_llm_records" in db.__all__
    qs_id, (q0, q1, _), _ = setup
    r1 = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs_id)
    r2 = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs_id)
    llm = {"family": "hyde", "prompt_tokens": 30, "completion_tokens": 20, "cached": False}
    db.save_eval_results(store, r1.id, [{**_result("hyde", q1), "details": {"llm": llm}},
                                        {**_result("hyde", q0), "details": {"llm": "not a mapping"}},
                                        {**_result("standard", q0), "details": {"heads": [1]}},
                                        _result("mrag", q0)])
    db.save_eval_results(store, r2.id, [_result("standard", q0)])
    assert db.eval_llm_records(store, [r1.id, r2.id]) == {r1.id: [("hyde", q1, llm)]}
    assert db.eval_llm_records(store, []) == {}


def test_a_resume_claim_keeps_only_the_results_of_the_queries_it_scores(
    store: Store, corpus: db.CorpusInfo, setup: tuple[int, list[int], int],
) -> None:
    """claim_eval_run(query_ids=...) drops, in the claim's transaction, the results and fingerprints of every
    other query and sets n_queries to their number; a count that disagrees with the ids changes nothing."""
    qs_id, (q0, q1, q2), _ = setup
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs_id, owner="a pid 1 #a",
                             config={"n_queries": 3, "queries": {str(q0): "2:a", str(q1): "2:b", str(q2): "2:c"}})
    db.save_eval_results(store, run.id, [_result(s, q) for s in ("x", "y") for q in (q0, q1, q2)])
    db.finish_eval_run(store, run.id, status="cancelled", owner="a pid 1 #a")
    with pytest.raises(db.InvalidInputError, match=r"n_queries \(3\) is not the number of query_ids \(2\)"):
        db.claim_eval_run(store, run.id, "b pid 2 #b", unfinished_only=True, n_queries=3, query_ids=[q0, q2])
    assert (db.get_eval_run(store, run.id).n_results, db.get_eval_run(store, run.id).status) == (6, "cancelled")
    claimed = db.claim_eval_run(store, run.id, "b pid 2 #b", unfinished_only=True, query_ids=[q0, q2])
    assert (claimed.status, claimed.n_results) == ("running", 4)
    assert claimed.config == {"n_queries": 2, "queries": {str(q0): "2:a", str(q2): "2:c"}}
    assert [(r.strategy, r.query_id) for r in db.load_eval_results(store, run.id)] == [
        ("x", q0), ("x", q2), ("y", q0), ("y", q2)]
    db.finish_eval_run(store, run.id, status="cancelled", owner="b pid 2 #b")
    emptied = db.claim_eval_run(store, run.id, "c pid 3 #c", unfinished_only=True, query_ids=[])
    assert (emptied.n_results, emptied.config) == (0, {"n_queries": 0, "queries": {}})
