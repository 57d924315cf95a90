"""A corpus whose names and texts carry hostile markup, for the escaping tests (AppTest and browser)."""

from __future__ import annotations

from dataclasses import dataclass

import db
from mrag_core.settings import RetrievalSettings

TEXTS = ["Cats purr, sleep in the sun and chase mice around the barn at night.",
         "Dogs fetch sticks, guard the house and bark at the postman every morning.",
         "Glaciers carve valleys as the ice slowly moves downhill over centuries.",
         "Volcanoes erupt lava and ash when magma rises through the crust."]


@dataclass(frozen=True)
class HostileCorpus:
    """What :func:`add_hostile_corpus` stored: the corpus, its document ids, the query set and the run."""

    corpus_id: int
    doc_ids: list[int]
    query_set_id: int
    run_id: int


def add_hostile_corpus(store: db.Store, name: str, markup: str) -> HostileCorpus:
    """Corpus ``"Corpus <name>"`` with categories, a suggestion agent and a query set named with ``name``, four
    documents (:data:`TEXTS`) whose titles and texts carry ``markup``, a query carrying it, a MiniLM index and an
    evaluation run named ``"Run <markup>"`` (standard and MRAG, c = k_max = 4)."""
    from mrag_core.models.loader import load_model
    from services.workflows import evaluation_runs as er
    from services.workflows.indexing import build_embedding_run

    c = db.create_corpus(store, f"Corpus {name}")
    cats = [f"cats {name}", f"earth {name}"]
    db.add_categories(store, c.id, cats)
    ids = list(db.add_documents(store, c.id, [
        {"title": f"Title {markup}", "text": f"{TEXTS[0]} {markup}", "label": cats[0]},
        {"title": f"Dogs {markup}", "text": TEXTS[1], "label": cats[0]},
        {"title": "Glaciers", "text": f"{TEXTS[2]}\n\n{markup}", "label": cats[1]},
        {"title": "Volcanoes", "text": TEXTS[3], "label": cats[1]},
    ]).document_ids)
    db.add_suggestions(store, [{"document_id": d, "agent": f"agent {name}", "category": cat}
                               for d, cat in zip(ids, (cats[0], cats[1], cats[1], cats[1]))])
    qs = db.create_query_set(store, c.id, f"Set {name}")
    db.add_queries(store, qs.id, [
        {"text": f"Which animals purr, and how do glaciers move? {markup}", "ground_truth": [ids[0], ids[2]]},
        {"text": "What do dogs fetch?", "ground_truth": [ids[1]]},
    ])
    lm = load_model("minilm", device="cpu")
    build_embedding_run(store, c.id, lm, layer=-1, batch_size=8)
    run_id = er.run_evaluation(store, corpus_id=c.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=("standard", "mrag"), c=4, k_max=4), lm=lm,
                               name=f"Run {markup}")
    return HostileCorpus(c.id, ids, qs.id, run_id)
