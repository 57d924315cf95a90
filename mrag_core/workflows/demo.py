"""Load the shipped demo corpus and its query set into a store (idempotent, resumable).

Every step is idempotent: categories are ensured, documents are de-duplicated by content hash,
and the query set is created only when missing, so an interrupted first start completes on the
next one without duplicating anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import db
from mrag_core.demo import DEMO_CORPUS_NAME, load_demo

DEMO_QUERY_SET_NAME = "Demo queries"


@dataclass(frozen=True)
class DemoStatus:
    corpus_id: int
    query_set_id: int
    added_documents: int
    created: bool


def ensure_demo_corpus(store: db.Store) -> DemoStatus:
    """Create (or complete) the demo corpus with its categories, documents and query set."""
    demo = load_demo()
    try:
        corpus = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
        created = False
    except db.NotFoundError:
        corpus = db.create_corpus(store, DEMO_CORPUS_NAME, "Original demo corpus shipped with MRAG Studio: 12 categories, 96 articles.")
        created = True
    db.add_categories(store, corpus.id, demo.categories)
    added = db.add_documents(
        store, corpus.id,
        [{"title": d["title"], "text": d["text"], "label": d["label"], "source": "demo"} for d in demo.documents],
        dedupe=True,
    ).added
    sets = [s for s in db.list_query_sets(store, corpus.id) if s.name == DEMO_QUERY_SET_NAME]
    if sets:
        qs_id = sets[0].id
    else:
        by_title = {row.title: row.id for row in db.list_documents(store, corpus.id, limit=None).items}
        qs = db.create_query_set(store, corpus.id, DEMO_QUERY_SET_NAME, source="manual",
                                 description="Hand-written multi-aspect queries over the demo corpus (1-6 aspects).")
        db.add_queries(store, qs.id, [
            {"text": q["text"], "ground_truth": [by_title[t] for t in q["topics"]], "n_aspects": len(q["topics"]),
             "fusion": list(q.get("fusion", [])), "generator": "hand-written", "status": "ok"}
            for q in demo.queries
        ])
        qs_id = qs.id
    return DemoStatus(corpus.id, qs_id, added, created)
