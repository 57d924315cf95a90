"""A hand-made evaluation run of three queries, stored through the real store, shared by the tests of the run
intervals and of the Evaluation Runs page's comparison."""

from __future__ import annotations

import db


def hand_run(store: db.Store) -> tuple[int, int, int]:
    """One 1-aspect and two 2-aspect queries, a run (standard, mrag) of k_max 2, w = 2. At k = aspects:
    standard rsr 0, .5, .5, csr 1, .5, .5, weighted 1/3, 1/2, 1/2; mrag rsr 1, .75, .5, csr 1, 1, .5, weighted
    1, 5/6, 1/2. Returns (corpus id, run id, the 1-aspect query's id)."""
    corpus = db.create_corpus(store, "C")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"document {i}", "label": lab}
                                              for i, lab in enumerate("aabb")]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    q1, q2, q3 = db.add_queries(store, qs.id, [{"text": "one", "ground_truth": [ids[0]]},
                                               {"text": "two", "ground_truth": [ids[0], ids[2]]},
                                               {"text": "three", "ground_truth": [ids[1], ids[3]]}])
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="hand", seed=0,
                             config={"model": "minilm", "layer": 5, "strategies": ["standard", "mrag"], "c": 4,
                                     "k_max": 2, "w": 2.0})
    results = {("standard", q1): ([0.0, 1.0], [1.0, 1.0]), ("standard", q2): ([0.5, 0.5], [0.5, 0.5]),
               ("standard", q3): ([0.5, 0.5], [0.5, 0.5]), ("mrag", q1): ([1.0, 1.0], [1.0, 1.0]),
               ("mrag", q2): ([0.5, 0.75], [1.0, 1.0]), ("mrag", q3): ([0.5, 0.5], [0.5, 0.5])}
    db.save_eval_results(store, run.id, [{"strategy": s, "query_id": q, "retrieved": [], "rsr": rsr, "csr": csr}
                                         for (s, q), (rsr, csr) in results.items()])
    db.finish_eval_run(store, run.id, status="done")
    return corpus.id, run.id, q1
