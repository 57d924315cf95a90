"""The demo corpus: loaded once, an interrupted first start completed, and a corpus in use left alone."""

from __future__ import annotations

import db
from mrag_core.demo import DEMO_CORPUS_NAME, load_demo
from mrag_core.workflows.demo import DEMO_QUERY_SET_NAME, ensure_demo_corpus


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


def test_an_interrupted_first_start_is_completed(store) -> None:
    corpus = db.create_corpus(store, DEMO_CORPUS_NAME)  # the first start stopped right after this
    status = ensure_demo_corpus(store)
    assert (status.corpus_id, status.created, status.added_documents) == (corpus.id, False, 96)
    assert len(db.list_queries(store, status.query_set_id)) == 24
    db.delete_query_set(store, status.query_set_id)  # as if it stopped before the query set: the corpus is
    assert len(db.list_queries(store, ensure_demo_corpus(store).query_set_id)) == 24  # untouched, so it comes back


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
