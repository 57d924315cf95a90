"""The demo corpus: loaded once, an interrupted first start completed, a corpus in use left alone, a
renamed one still found, a deleted one (or its deleted query set) not put back unless restored."""

from __future__ import annotations

import pytest

import db
from services.demo import DEMO_CORPUS_NAME, load_demo
from services.demo.store import (
    DEMO_MARKER,
    DEMO_QUERIES_MARKER,
    DEMO_QUERY_SET_NAME,
    demo_corpus_id,
    demo_query_set_id,
    ensure_demo_corpus,
)


def _demo_set(store: db.Store, corpus_id: int) -> list[db.QuerySetInfo]:
    return [s for s in db.list_query_sets(store, corpus_id) if s.name == DEMO_QUERY_SET_NAME]


def test_first_start_loads_everything_and_the_next_one_nothing(store) -> None:
    demo = load_demo()
    first = ensure_demo_corpus(store)
    assert first.created and first.added_documents == len(demo.documents) == 96
    corpus = db.get_corpus(store, first.corpus_id)
    assert corpus.name == DEMO_CORPUS_NAME and corpus.n_documents == 96 and corpus.version == 2
    queries = db.list_queries(store, first.query_set_id)
    assert len(queries) == len(demo.queries) == 24
    titles = {d.id: d.title for d in db.list_documents(store, corpus.id, limit=None).items}
    assert [[titles[i] for i in q.ground_truth] for q in queries] == [q["topics"] for q in demo.queries]
    again = ensure_demo_corpus(store)
    assert (again.created, again.added_documents, again.query_set_id) == (False, 0, first.query_set_id)
    assert db.get_corpus(store, corpus.id).version == 2


@pytest.mark.every_backend
def test_an_interrupted_first_start_is_completed(store) -> None:
    corpus = db.create_corpus(store, DEMO_CORPUS_NAME)  # the first start stopped right after this
    status = ensure_demo_corpus(store)
    assert (status.corpus_id, status.created, status.added_documents) == (corpus.id, False, 96)
    assert len(db.list_queries(store, status.query_set_id)) == 24
    db.delete_query_set(store, status.query_set_id)  # as if it stopped before the query set (and its marker):
    assert db.clear_marker(store, DEMO_QUERIES_MARKER)
    assert len(db.list_queries(store, ensure_demo_corpus(store).query_set_id)) == 24  # the corpus is untouched


@pytest.mark.every_backend
def test_a_demo_corpus_in_use_is_not_put_back(store) -> None:
    status = ensure_demo_corpus(store)
    ids = db.document_ids(store, status.corpus_id)
    db.delete_document(store, ids[0])
    db.update_document(store, ids[1], text="A text the annotator corrected.")
    db.delete_query_set(store, status.query_set_id)
    again = ensure_demo_corpus(store)
    assert (again.added_documents, again.query_set_id) == (0, None)
    assert db.document_ids(store, status.corpus_id) == ids[1:]
    assert db.get_document(store, ids[1]).text == "A text the annotator corrected."
    assert _demo_set(store, status.corpus_id) == []


def test_a_deleted_demo_query_set_is_not_put_back(store) -> None:
    status = ensure_demo_corpus(store)
    db.delete_query_set(store, status.query_set_id)  # the documents are untouched (version 2)
    again = ensure_demo_corpus(store)
    assert (again.corpus_id, again.query_set_id) == (status.corpus_id, None)
    assert _demo_set(store, status.corpus_id) == []
    restored = ensure_demo_corpus(store, restore=True)
    assert len(db.list_queries(store, restored.query_set_id)) == 24


def test_a_renamed_demo_corpus_is_still_the_demo(store) -> None:
    status = ensure_demo_corpus(store)
    db.rename_corpus(store, status.corpus_id, "My volcano study")
    again = ensure_demo_corpus(store)
    assert (again.corpus_id, again.query_set_id, again.created) == (status.corpus_id, status.query_set_id, False)
    assert [c.name for c in db.list_corpora(store)] == ["My volcano study"]
    assert demo_corpus_id(store) == status.corpus_id


def test_a_deleted_demo_corpus_stays_deleted_until_restored(store) -> None:
    status = ensure_demo_corpus(store)
    assert demo_corpus_id(store) == status.corpus_id
    db.delete_corpus(store, status.corpus_id)
    again = ensure_demo_corpus(store)  # the next server start
    assert (again.corpus_id, again.query_set_id, again.removed) == (None, None, True)
    assert db.list_corpora(store) == [] and demo_corpus_id(store) is None

    restored = ensure_demo_corpus(store, restore=True)
    assert restored.created and not restored.removed and restored.added_documents == 96
    assert db.get_marker(store, DEMO_MARKER).startswith(f"{restored.corpus_id}@")
    assert len(db.list_queries(store, restored.query_set_id)) == 24
    assert demo_corpus_id(store) == restored.corpus_id


def test_restoring_under_a_taken_name_changes_nothing(store) -> None:
    status = ensure_demo_corpus(store)
    db.delete_corpus(store, status.corpus_id)
    mine = db.create_corpus(store, DEMO_CORPUS_NAME, "the user's own")
    if store.is_sqlite:  # SQLite gives it the demo's old id (PostgreSQL's sequence never reuses one)
        assert mine.id == status.corpus_id
    assert ensure_demo_corpus(store).removed  # a corpus with the demo's name (and on SQLite id) is not the demo
    with pytest.raises(db.DuplicateError):
        ensure_demo_corpus(store, restore=True)
    assert [(c.id, c.n_documents) for c in db.list_corpora(store)] == [(mine.id, 0)]


def test_the_demo_query_set_is_found_not_the_newest(store) -> None:
    status = ensure_demo_corpus(store)
    newer = db.create_query_set(store, status.corpus_id, "Generated later", source="manual")
    assert db.list_query_sets(store, status.corpus_id)[0].id == newer.id  # the newest is not the demo's
    assert demo_query_set_id(store) == status.query_set_id
    db.delete_query_set(store, status.query_set_id)
    assert demo_query_set_id(store) is None  # gone: not the newer set in its place
    restored = ensure_demo_corpus(store, restore=True)
    assert demo_query_set_id(store) == restored.query_set_id != newer.id
    db.delete_corpus(store, status.corpus_id)
    assert demo_query_set_id(store) is None
