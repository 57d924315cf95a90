"""Query sets, queries and ground truth."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import db
from db import Store


def test_query_set_round_trip(store: Store, corpus: db.CorpusInfo, docs: list[int]) -> None:
    qs = db.create_query_set(
        store, corpus.id, "gen-1", description="first try", source="generated-llm",
        params={"n_aspects": [2, 3], "model": "x"},
    )
    assert (qs.name, qs.source, qs.params, qs.n_queries) == (
        "gen-1",
        "generated-llm",
        {"n_aspects": [2, 3], "model": "x"},
        0,
    )
    ids = db.add_queries(
        store,
        qs.id,
        [
            {"text": "sport and politics?", "ground_truth": [docs[2], docs[0]],
             "fusion": ["sport", "politics"], "generator": "llm:x"},
            {"text": "science?", "ground_truth": [docs[1]], "status": "flagged", "n_aspects": 1},
            {"text": "", "status": "failed", "error": "LLM refused"},
        ],
    )
    more = db.add_queries(store, qs.id, [{"text": "later", "ground_truth": [docs[3]]}])
    queries = db.list_queries(store, qs.id)
    assert [q.id for q in queries] == ids + more
    assert [q.position for q in queries] == [0, 1, 2, 3]
    first = queries[0]
    assert (first.text, first.ground_truth, first.n_aspects, first.fusion, first.generator, first.status) == (
        "sport and politics?", [docs[2], docs[0]], 2, ["sport", "politics"], "llm:x", "ok",
    )
    assert (queries[2].status, queries[2].error, queries[2].ground_truth) == ("failed", "LLM refused", [])
    assert [q.id for q in db.list_queries(store, qs.id, status="flagged")] == [ids[1]]
    assert db.get_query_set(store, qs.id).n_queries == 4
    assert db.get_query(store, ids[0]) == first


def test_update_query(store: Store, corpus: db.CorpusInfo, docs: list[int]) -> None:
    qs = db.create_query_set(store, corpus.id, "s")
    (qid,) = db.add_queries(store, qs.id, [{"text": "old", "ground_truth": [docs[0], docs[1]]}])
    row = db.update_query(
        store, qid, text="new", status="flagged", ground_truth=[docs[3], docs[2], docs[1]], fusion=["a"]
    )
    assert (row.text, row.status, row.ground_truth, row.fusion) == (
        "new",
        "flagged",
        [docs[3], docs[2], docs[1]],
        ["a"],
    )
    row = db.update_query(store, qid, n_aspects=3, error="note")
    assert (row.text, row.n_aspects, row.error, row.ground_truth) == ("new", 3, "note", [docs[3], docs[2], docs[1]])
    with pytest.raises(db.InvalidInputError, match="status"):
        db.update_query(store, qid, status="great")
    with pytest.raises(db.InvalidInputError, match="twice"):
        db.update_query(store, qid, ground_truth=[docs[0], docs[0]])
    with pytest.raises(db.NotFoundError):
        db.update_query(store, 999, text="x")
    assert db.get_query(store, qid).ground_truth == [docs[3], docs[2], docs[1]]


def test_bad_query_rejects_the_whole_batch(
    store: Store, corpus: db.CorpusInfo, docs: list[int], count_rows: Callable[[str], int],
) -> None:
    other = db.create_corpus(store, "Other")
    (foreign,) = db.add_documents(store, other.id, [{"text": "elsewhere"}]).document_ids
    qs = db.create_query_set(store, corpus.id, "s")
    with pytest.raises(db.InvalidInputError, match="Query #2: document"):
        db.add_queries(
            store, qs.id, [{"text": "ok", "ground_truth": [docs[0]]}, {"text": "bad", "ground_truth": [foreign]}]
        )
    with pytest.raises(db.InvalidInputError, match="Query #1 has no text"):
        db.add_queries(store, qs.id, [{"text": "  ", "ground_truth": [docs[0]]}])
    assert count_rows("queries") == 0 and count_rows("query_ground_truth") == 0


def test_query_set_names_and_deletion(
    store: Store, corpus: db.CorpusInfo, docs: list[int], count_rows: Callable[[str], int],
) -> None:
    a = db.create_query_set(store, corpus.id, "a")
    b = db.create_query_set(store, corpus.id, "b", source="imported")
    other = db.create_corpus(store, "Other")
    db.create_query_set(store, other.id, "a")  # same name in another corpus is fine
    with pytest.raises(db.DuplicateError):
        db.create_query_set(store, corpus.id, "a")
    with pytest.raises(db.InvalidInputError):
        db.create_query_set(store, corpus.id, " ")
    assert [s.name for s in db.list_query_sets(store, corpus.id)] == ["b", "a"]
    assert len(db.list_query_sets(store)) == 3

    q1, q2 = db.add_queries(
        store, a.id, [{"text": "1", "ground_truth": docs[:2]}, {"text": "2", "ground_truth": docs[2:]}]
    )
    db.delete_query(store, q1)
    assert [q.id for q in db.list_queries(store, a.id)] == [q2]
    db.delete_documents(store, corpus.id, [docs[2]])  # ground truth follows document deletion
    assert db.get_query(store, q2).ground_truth == [docs[3]]
    db.delete_query_set(store, a.id)
    assert count_rows("queries") == 0 and count_rows("query_ground_truth") == 0
    assert [s.id for s in db.list_query_sets(store, corpus.id)] == [b.id]
    with pytest.raises(db.NotFoundError):
        db.delete_query_set(store, a.id)
