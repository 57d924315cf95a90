"""A run's seconds (timing['total_s'], the Runs table's 'seconds' column) and its parts (load_index,
embed_queries) count its stopped sessions too.

Found on the MRAG Wikipedia benchmark: a run stopped after 378 of its 750 results and resumed showed 0.6 s, the
resume's seconds only, while the run it repeated showed 200 s: a stopped session stored no total_s, so its time was
lost and the next session started the count from 0. After that fix (4a81a70) a resumed run's total_s and evaluate
added up its sessions, but load_index and embed_queries kept only the last session's."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from mrag_core.settings import RetrievalSettings  # noqa: E402
from services.workflows import evaluation_runs as er  # noqa: E402
from tests.support.mini_corpus import add_sky_and_food  # noqa: E402

LOAD_S, EMBED_S = 7.0, 3.0  # seconds that loading the index and one embedding call take on the run's clock


def _sky_and_food(store: db.Store) -> tuple[db.CorpusInfo, db.QuerySetInfo]:
    """A corpus of 4 documents in 2 categories and a set of 3 queries (2 with one aspect, 1 with two)."""
    corpus, ids = add_sky_and_food(store)
    qs = db.create_query_set(store, corpus.id, "Q")
    db.add_queries(store, qs.id, [{"text": "comet", "ground_truth": [ids[0]]},
                                  {"text": "bread", "ground_truth": [ids[2]]},
                                  {"text": "galaxy and sauce", "ground_truth": [ids[1], ids[3]]}])
    return corpus, qs


@pytest.fixture(scope="module")
def lm():
    import torch

    from mrag_core.models.loader import load_model

    torch.set_num_threads(1)
    return load_model("minilm")


def test_the_seconds_of_a_stopped_session_count_in_the_runs_total(store, lm, monkeypatch) -> None:
    corpus, qs = _sky_and_food(store)
    clock = [1000.0]  # the run's clock: 10 s pass at every progress report

    def progress(stage: str, done: int, total: int) -> None:
        clock[0] += 10.0
        if stage == "evaluation" and stop_now[0]:
            cancel.set()

    # the workflow's clock only (its module's ``time``), not the process's
    monkeypatch.setattr(er, "time", SimpleNamespace(perf_counter=lambda: clock[0], monotonic=time.monotonic))
    stop_now, cancel = [True], threading.Event()
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["standard", "mrag"], c=4, k_max=2), lm=lm,
                               cancel=cancel, batch_size=2, progress=progress)
    stopped = db.get_eval_run(store, run_id)
    assert stopped.status == "cancelled" and stopped.n_results == 2
    first = stopped.timing["total_s"]  # the stopped session's seconds: none were stored
    assert first > 0 and first % 10.0 == 0.0
    stop_now[0] = False
    before = clock[0]
    er.resume_evaluation(store, run_id, lm=lm, progress=progress)
    done = db.get_eval_run(store, run_id)
    assert done.status == "done" and done.n_results == 6
    assert done.timing["total_s"] == pytest.approx(first + clock[0] - before)  # both sessions


def test_load_index_and_embed_queries_add_up_over_a_stop_and_a_resume(store, lm, monkeypatch) -> None:
    corpus, qs = _sky_and_food(store)
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
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["standard", "mrag"], c=4, k_max=2), lm=lm,
                               cancel=cancel, batch_size=2, progress=stop_after_first_batch)
    stopped = db.get_eval_run(store, run_id)
    assert stopped.status == "cancelled" and stopped.n_results == 2
    assert (stopped.timing["load_index"], stopped.timing["embed_queries"]) == (LOAD_S, EMBED_S)
    er.resume_evaluation(store, run_id, lm=lm)
    done = db.get_eval_run(store, run_id)
    assert done.status == "done" and done.n_results == 6
    assert (done.timing["load_index"], done.timing["embed_queries"]) == (2 * LOAD_S, 2 * EMBED_S)  # both sessions
    assert done.timing["total_s"] == 2 * (LOAD_S + EMBED_S)  # the clock moved for nothing else


def test_a_session_stopped_while_embedding_its_queries_keeps_those_seconds(store, lm, monkeypatch) -> None:
    corpus, qs = _sky_and_food(store)
    clock = [1000.0]  # the workflow's clock: moves only while embedding
    monkeypatch.setattr(er, "time", SimpleNamespace(perf_counter=lambda: clock[0], monotonic=time.monotonic))
    embed = er.cached_embed
    stop_in_embedding = [True]

    def embed_then_maybe_stop(*args, **kwargs):
        clock[0] += EMBED_S
        if stop_in_embedding[0]:
            raise er.ExtractionCancelled("stopped while embedding the queries")
        return embed(*args, **kwargs)

    monkeypatch.setattr(er, "cached_embed", embed_then_maybe_stop)
    run_id = er.run_evaluation(store, corpus_id=corpus.id, query_set_id=qs.id,
                               settings=RetrievalSettings(strategies=["standard", "mrag"], c=4, k_max=2), lm=lm,
                               batch_size=2)
    stopped = db.get_eval_run(store, run_id)
    assert stopped.status == "cancelled" and stopped.n_results == 0
    assert stopped.timing["embed_queries"] == EMBED_S  # was left out: the stop came before it was set
    stop_in_embedding[0] = False
    er.resume_evaluation(store, run_id, lm=lm)
    done = db.get_eval_run(store, run_id)
    assert done.status == "done" and done.n_results == 6
    assert done.timing["embed_queries"] == 2 * EMBED_S  # both sessions
