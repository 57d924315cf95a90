"""Load the shipped demo corpus and its query set into a store (once, resumable).

A first start creates the corpus, its categories and documents, then the query set, in separate
transactions; an interrupted first start completes on the next one without duplicating anything.
Once set up, the corpus is the user's: documents deleted or edited, categories removed, are not put
back at the next start (its ``version`` tells: 1 when created, 2 after the demo documents were added,
more after any later change of its documents).
"""

from __future__ import annotations

from dataclasses import dataclass

import db
from mrag_core.demo import DEMO_CORPUS_NAME, load_demo

DEMO_QUERY_SET_NAME = "Demo queries"


@dataclass(frozen=True)
class DemoStatus:
    """What :func:`ensure_demo_corpus` found or did; ``query_set_id`` is None when the user deleted the set."""

    corpus_id: int
    query_set_id: int | None
    added_documents: int
    created: bool


#: ``corpus.version`` right after the demo documents were added (created at 1, one add).
SET_UP_VERSION = 2


def ensure_demo_corpus(store: db.Store) -> DemoStatus:
    """Create the demo corpus with its categories, documents and query set, or complete an interrupted
    first start; a corpus in use is left as it is."""
    demo = load_demo()
    try:
        corpus = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
        created = False
    except db.NotFoundError:
        corpus = db.create_corpus(store, DEMO_CORPUS_NAME, "Original demo corpus shipped with MRAG Studio: 12 categories, 96 articles.")
        created = True
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
        return DemoStatus(corpus.id, sets[0].id, added, created)
    if db.get_corpus(store, corpus.id).version != SET_UP_VERSION:  # its documents changed since: the user's now
        return DemoStatus(corpus.id, None, added, created)
    by_title = {row.title: row.id for row in db.list_documents(store, corpus.id, limit=None).items}
    qs = db.create_query_set(store, corpus.id, DEMO_QUERY_SET_NAME, source="manual",
                             description="Hand-written multi-aspect queries over the demo corpus (1-6 aspects).")
    db.add_queries(store, qs.id, [
        {"text": q["text"], "ground_truth": [by_title[t] for t in q["topics"]], "n_aspects": len(q["topics"]),
         "fusion": list(q.get("fusion", [])), "generator": "hand-written", "status": "ok"}
        for q in demo.queries if all(t in by_title for t in q["topics"])
    ])
    return DemoStatus(corpus.id, qs.id, added, created)
