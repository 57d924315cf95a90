"""Load the shipped demo corpus and its query set into a store (once, resumable).

A first start creates the corpus, its categories and documents, then the query set, in separate
transactions; an interrupted first start completes on the next one without duplicating anything.
Once set up, the corpus is the user's: documents deleted or edited, categories removed, are not put
back at the next start (its ``version`` tells: 1 when created, 2 after the demo documents were added,
more after any later change of its documents). The marker ``demo_corpus`` (``db.set_marker``) keeps the
demo corpus' id: a renamed demo corpus is still the demo, and a deleted one is not created again unless
asked (``restore=True``, the Home page's "Restore the demo corpus").
"""

from __future__ import annotations

from dataclasses import dataclass

import db
from services.demo import DEMO_CORPUS_NAME, load_demo

DEMO_QUERY_SET_NAME = "Demo queries"
#: ``db`` marker holding :func:`db.identity_key` of the demo corpus set up in this database.
DEMO_MARKER = "demo_corpus"
#: ``db`` marker holding the id of the demo query set once created (a deleted set is not created again).
DEMO_QUERIES_MARKER = "demo_queries"


@dataclass(frozen=True)
class DemoStatus:
    """What :func:`ensure_demo_corpus` found or did; ``query_set_id`` is None when the user deleted the set;
    ``corpus_id`` is None when the user deleted the demo corpus (``removed``)."""

    corpus_id: int | None
    query_set_id: int | None
    added_documents: int
    created: bool

    @property
    def removed(self) -> bool:
        """The demo corpus was set up in this database and then deleted (not restored)."""
        return self.corpus_id is None


#: ``corpus.version`` right after the demo documents were added (created at 1, one add).
SET_UP_VERSION = 2


def _demo_corpus(store: db.Store, marked: str | None) -> db.CorpusInfo | None:
    """The demo corpus that the ``demo_corpus`` marker value ``marked`` names (a plain id when written by
    migration 0005), or without a marker the corpus of the shipped name; None when it is gone."""
    if marked is None:  # set up before markers existed
        try:
            return db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
        except db.NotFoundError:
            return None
    head = marked.split("@", 1)[0]
    try:
        corpus = db.get_corpus(store, int(head)) if head.isdigit() else None
    except db.NotFoundError:
        return None
    return corpus if corpus is not None and marked in (head, db.identity_key(corpus)) else None


def demo_corpus_id(store: db.Store) -> int | None:
    """The id of this database's demo corpus (whatever it is called now), or None when there is none."""
    corpus = _demo_corpus(store, db.get_marker(store, DEMO_MARKER))
    return corpus.id if corpus is not None else None


def demo_query_set_id(store: db.Store) -> int | None:
    """The id of the demo corpus' own query set (the 24 hand-written queries, whatever it is called now), or None
    when it or the demo corpus is gone. Home's demo steps open it, not the corpus' newest set."""
    corpus_id = demo_corpus_id(store)
    marked = db.get_marker(store, DEMO_QUERIES_MARKER)
    if corpus_id is None or marked is None or not marked.isdigit():
        return None
    try:
        qs = db.get_query_set(store, int(marked))
    except db.NotFoundError:
        return None
    return qs.id if qs.corpus_id == corpus_id else None


def ensure_demo_corpus(store: db.Store, *, restore: bool = False) -> DemoStatus:
    """Create the demo corpus with its categories, documents and query set, or complete an interrupted
    first start; a corpus in use is left as it is. A demo corpus the user deleted is created again only
    with ``restore`` (under its shipped name, which must be free)."""
    demo = load_demo()
    created = False
    marked = db.get_marker(store, DEMO_MARKER)
    corpus = _demo_corpus(store, marked)
    if corpus is None:
        if marked is not None and not restore:  # set up here once, then deleted
            return DemoStatus(None, None, 0, False)
        corpus = db.create_corpus(store, DEMO_CORPUS_NAME,
                                  "Original demo corpus shipped with MRAG Studio: 12 categories, 96 articles.")
        created = True
    db.set_marker(store, DEMO_MARKER, db.identity_key(corpus))
    added = 0
    if corpus.n_documents == 0 and corpus.version == 1:  # created, documents not added yet
        db.add_categories(store, corpus.id, demo.categories)
        added = db.add_documents(
            store, corpus.id,
            [{"title": d["title"], "text": d["text"], "label": d["label"], "source": "demo"} for d in demo.documents],
            dedupe=True,
        ).added
    sets = [s for s in db.list_query_sets(store, corpus.id) if s.name == DEMO_QUERY_SET_NAME]
    if sets:
        db.set_marker(store, DEMO_QUERIES_MARKER, str(sets[0].id))
        return DemoStatus(corpus.id, sets[0].id, added, created)
    deleted = db.get_marker(store, DEMO_QUERIES_MARKER) is not None and not (created or restore)
    if deleted or db.get_corpus(store, corpus.id).version != SET_UP_VERSION:  # the user's now
        return DemoStatus(corpus.id, None, added, created)
    by_title = {row.title: row.id for row in db.list_documents(store, corpus.id, limit=None).items}
    qs = db.create_query_set(store, corpus.id, DEMO_QUERY_SET_NAME, source="manual",
                             description="Hand-written multi-aspect queries over the demo corpus (1-6 aspects).")
    db.add_queries(store, qs.id, [
        {"text": q["text"], "ground_truth": [by_title[t] for t in q["topics"]], "n_aspects": len(q["topics"]),
         "fusion": list(q.get("fusion", [])), "generator": "hand-written", "status": "ok"}
        for q in demo.queries if all(t in by_title for t in q["topics"])
    ])
    db.set_marker(store, DEMO_QUERIES_MARKER, str(qs.id))
    return DemoStatus(corpus.id, qs.id, added, created)
