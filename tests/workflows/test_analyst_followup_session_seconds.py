"""A stopped and resumed run's load_index and embed_queries seconds count every session, as total_s and evaluate do.

Found by the analyst walk-through: after 4a81a70 a resumed run's total_s and evaluate added up its sessions, but its
timing kept only the last session's load_index and embed_queries, so the parts no longer added up to the whole."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from mrag_core.workflows import evaluation_runs as er  # noqa: E402

LOAD_S, EMBED_S = 7.0, 3.0  # seconds that loading the index and one embedding call take on the run's clock


@pytest.fixture(scope="module")
def lm():
    import torch

    from mrag_core.models.loader import load_model

    torch.set_num_threads(1)
    return load_model("minilm")


def test_load_index_and_embed_queries_add_up_over_a_stop_and_a_resume(store, lm, monkeypatch) -> None:
    corpus = db.create_corpus(store, "T")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": text, "label": lab} for i, (text, lab) in
                                              enumerate([("A comet passed near the sun.", "sky"),
                                                         ("The telescope saw a galaxy.", "sky"),
                                                         ("Knead the bread dough.", "food"),
                                                         ("Simmer the tomato sauce.", "food")])]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    db.add_queries(store, qs.id, [{"text": "comet", "ground_truth": [ids[0]]},
                                  {"text": "bread", "ground_truth": [ids[2]]},
                                  {"text": "galaxy and sauce", "ground_truth": [ids[1], ids[3]]}])
    clock = [1000.0]  # the workflow's clock (its module's ``time``): moves only while loading and embedding
    monkeypatch.setattr(er, "time", SimpleNamespace(perf_counter=lambda: clock[0], monotonic=time.monotonic))
    load, embed = er.indexing.load_corpus_index, er.cached_embed

    def slow_load(*args, **kwargs):
        clock[0] += LOAD_S
        return load(*args, **kwargs)

    def slow_embed(*args, **kwargs):
        clock[0] += EMBED_S
        return embed(*args, **kwargs)

    monkeypatch.setattr(er.indexing, "load_corpus_index", slow_load)
    monkeypatch.setattr(er, "cached_embed", slow_embed)
    cancel = threading.Event()

    def stop_after_first_batch(stage: str, done: int, total: int) -> None:
        if stage == "evaluation":
            cancel.set()

    # no fusion or LLM strategy: one embedding call per session, for the queries still to score
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id, strategies=["standard", "mrag"], c=4,
                               k_max=2, lm=lm, cancel=cancel, batch_size=2, progress=stop_after_first_batch)
    stopped = db.get_eval_run(store, run_id)
    assert stopped.status == "cancelled" and stopped.n_results == 2
    assert (stopped.timing["load_index"], stopped.timing["embed_queries"]) == (LOAD_S, EMBED_S)
    er.resume_evaluation(store, run_id, lm=lm)
    done = db.get_eval_run(store, run_id)
    assert done.status == "done" and done.n_results == 6
    assert (done.timing["load_index"], done.timing["embed_queries"]) == (2 * LOAD_S, 2 * EMBED_S)  # both sessions
    assert done.timing["total_s"] == 2 * (LOAD_S + EMBED_S)  # the clock moved for nothing else
