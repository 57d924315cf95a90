"""Embedding runs through the store: build, cancel midway, resume, reuse, staleness, load as index.

A tiny random BERT built in code (word-level tokenizer) keeps these tests fast; the vectors the
workflow stores must equal a direct ``embed_texts`` of the same documents.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
import torch

import db
from mrag_core.extraction import embed_texts
from mrag_core.importance import head_importance
from mrag_core.models.loader import model_from_module
from mrag_core.strategies import mrag_search, standard_search
from services.workflows.indexing import (
    build_embedding_run,
    load_corpus_index,
    load_run_embeddings,
    model_for_run,
    query_window,
    run_state,
    stored_indexes,
)
from tests.support.tiny_tokenizer import WordTokenizer

torch.set_num_threads(1)
VOCAB = 211


def tiny_lm():
    from transformers import BertConfig, BertModel

    torch.manual_seed(7)
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128)
    return model_from_module(
        BertModel(cfg).eval(), WordTokenizer(VOCAB, specials=True, lowercase=True), name="tiny-bert"
    )


WORDS = ("river bread quantum violin glacier tax harbor orbit fern saddle lantern copper meadow "
         "opera cipher tide falcon marble pepper engine").split()


def doc_text(i: int) -> str:
    rng = np.random.default_rng(i)
    return " ".join(rng.choice(WORDS, size=4 + i % 9))



@pytest.fixture
def corpus(store) -> int:
    c = db.create_corpus(store, "tiny")
    db.add_categories(store, c.id, ["alpha", "beta", "gamma"])
    docs = [{"title": f"Doc {i}", "text": f"{doc_text(i)} n{i}", "label": ("alpha", "beta", "gamma")[i % 3]}
            for i in range(23)]
    db.add_documents(store, c.id, docs)
    return c.id


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


def direct(store, corpus_id, lm, layer=-1):
    ids = db.document_ids(store, corpus_id)
    texts = [r.text for r in db.get_documents(store, ids)]
    return ids, embed_texts(lm, texts, kind="doc", layer=layer, batch_size=64)


@pytest.mark.every_backend
def test_build_stores_vectors_equal_to_direct_embedding(store, corpus, lm):
    seen: list[tuple[int, int, float | None]] = []
    res = build_embedding_run(
        store, corpus, lm, layer=-1, batch_size=5, progress=lambda d, t, e: seen.append((d, t, e))
    )
    assert res.status == "done" and res.embedded_now == 23 and not res.resumed and not res.reused
    run = res.run
    assert run.status == "done" and run.n_saved == 23 and run.layer == lm.n_layers - 1 and run.pooling == "mean"
    assert [d for d, _, _ in seen] == [0, 5, 10, 15, 20, 23] and all(t == 23 for _, t, _ in seen)
    assert seen[-1][2] == pytest.approx(0.0) and seen[1][2] is not None and seen[1][2] > 0
    ids, std, heads = db.load_vectors(store, run.id)
    want_ids, want = direct(store, corpus, lm)
    assert ids.tolist() == want_ids
    np.testing.assert_allclose(std, want.standard, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(heads, want.heads, rtol=1e-4, atol=1e-5)
    # importance is stored with the run and equals the engine's computation on these vectors
    expect = head_importance(heads)
    np.testing.assert_allclose(run.importance["score"], expect.score, rtol=1e-9)
    np.testing.assert_allclose(run.importance["norm"], expect.norm, rtol=1e-9)
    assert run.timings["embed_s"] > 0 and run.timings["batch_size"] == 5


@pytest.mark.every_backend
def test_cancel_midway_then_resume_embeds_only_the_rest(store, corpus, lm, monkeypatch):
    cancel = threading.Event()

    def progress(done, total, eta):
        if done >= 10:
            cancel.set()

    first = build_embedding_run(store, corpus, lm, layer=0, batch_size=5, progress=progress, cancel=cancel)
    assert first.status == "cancelled" and first.embedded_now == 10
    assert first.run.status == "cancelled" and first.run.n_saved == 10
    assert run_state(store, first.run) == "partial"
    left = db.missing_documents(store, first.run.id)
    assert len(left) == 13

    # Count what the resumed build embeds: only the 13 missing documents.
    import services.workflows.indexing as indexing

    embedded: list[int] = []
    real = indexing.embed_texts

    def counting(lm_, texts, **kw):
        embedded.append(len(texts))
        return real(lm_, texts, **kw)

    monkeypatch.setattr(indexing, "embed_texts", counting)
    second = build_embedding_run(store, corpus, lm, layer=0, batch_size=5)
    assert second.status == "done" and second.resumed and second.run.id == first.run.id
    assert sum(embedded) == 13 and second.embedded_now == 13
    assert db.missing_documents(store, second.run.id) == []
    _, std, heads = db.load_vectors(store, second.run.id)
    _, want = direct(store, corpus, lm, layer=0)
    np.testing.assert_allclose(heads, want.heads, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(std, want.standard, rtol=1e-4, atol=1e-5)
    assert second.run.importance is not None

    # A third call reuses the finished run and embeds nothing.
    embedded.clear()
    third = build_embedding_run(store, corpus, lm, layer=0, batch_size=5)
    assert third.reused and third.run.id == first.run.id and embedded == []


def test_stale_run_is_detected_and_rebuilt_as_a_new_run(store, corpus, lm):
    res = build_embedding_run(store, corpus, lm, layer=-1, batch_size=8)
    assert run_state(store, res.run) == "done"
    first_doc = db.document_ids(store, corpus)[0]
    db.update_document(store, first_doc, text="an entirely new text about copper engines")
    assert db.is_stale(store, res.run.id)
    assert run_state(store, db.get_embedding_run(store, res.run.id)) == "stale"
    again = build_embedding_run(store, corpus, lm, layer=-1, batch_size=8)
    assert again.run.id != res.run.id and not again.resumed and not db.is_stale(store, again.run.id)
    # Only the edited document is embedded; the 22 others keep the vectors of their unchanged text.
    assert (again.embedded_now, again.copied, again.run.timings["copied"]) == (1, 22, 22)
    ids, std, heads = db.load_vectors(store, again.run.id)
    want_ids, want = direct(store, corpus, lm)
    assert ids.tolist() == want_ids
    np.testing.assert_allclose(std, want.standard, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(heads, want.heads, rtol=1e-4, atol=1e-5)
    assert run_state(store, again.run) == "done" and again.run.importance is not None
    np.testing.assert_allclose(again.run.importance["score"], head_importance(heads).score, rtol=1e-9)
    # "Rebuild from scratch" embeds everything again.
    fresh = build_embedding_run(store, corpus, lm, layer=-1, batch_size=8, rebuild=True)
    assert (fresh.embedded_now, fresh.copied) == (23, 0)


def test_added_and_deleted_documents_embed_only_the_new_ones(store, corpus, lm, monkeypatch):
    import services.workflows.indexing as indexing

    first = build_embedding_run(store, corpus, lm, layer=0, batch_size=8)
    ids = db.document_ids(store, corpus)
    db.delete_documents(store, corpus, ids[:3])
    db.add_documents(store, corpus, [{"title": "New", "text": f"{doc_text(100 + i)} fresh{i}", "label": "beta"}
                                     for i in range(4)])
    embedded: list[str] = []
    real = indexing.embed_texts
    monkeypatch.setattr(
        indexing, "embed_texts", lambda lm_, texts, **kw: (embedded.extend(texts), real(lm_, texts, **kw))[1]
    )
    seen: list[tuple[int, int]] = []
    again = build_embedding_run(store, corpus, lm, layer=0, batch_size=8, progress=lambda d, t, e: seen.append((d, t)))
    assert again.run.id != first.run.id and (again.embedded_now, again.copied) == (4, 20)
    assert sorted(embedded) == sorted(r.text for r in db.get_documents(store, db.document_ids(store, corpus))
                                      if r.title == "New")
    assert seen == [(20, 24), (24, 24)]  # progress starts at the copied documents
    want_ids, want = direct(store, corpus, lm, layer=0)
    got_ids, std, heads = db.load_vectors(store, again.run.id)
    assert got_ids.tolist() == want_ids
    np.testing.assert_allclose(heads, want.heads, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(std, want.standard, rtol=1e-4, atol=1e-5)
    # Another layer is another space: nothing to copy from the layer-0 runs.
    other = build_embedding_run(store, corpus, lm, layer=-1, batch_size=8)
    assert (other.embedded_now, other.copied) == (24, 0)


def test_pooling_choice_makes_its_own_run(store, corpus, lm):
    a = build_embedding_run(store, corpus, lm, layer=-1, pooling="mean", batch_size=32)
    b = build_embedding_run(store, corpus, lm, layer=-1, pooling="first", batch_size=32)
    assert a.run.id != b.run.id and b.run.pooling == "first"
    _, _, ha = db.load_vectors(store, a.run.id)
    _, _, hb = db.load_vectors(store, b.run.id)
    assert not np.allclose(ha, hb)
    assert model_for_run(lm, b.run).head_pooling == "first"


def test_precision_makes_its_own_run_and_never_mixes_vectors(store, corpus, lm, monkeypatch):
    import dataclasses

    import services.workflows.indexing as indexing

    full = build_embedding_run(store, corpus, lm, layer=-1, batch_size=32)
    assert full.run.precision == "float32"
    # The same weights labelled float16 (as --half on CUDA loads them) stand for a half-precision build.
    half_lm = dataclasses.replace(lm, dtype=torch.float16)
    assert indexing.precision_of(half_lm) == "float16"
    cancel = threading.Event()
    half = build_embedding_run(store, corpus, half_lm, layer=-1, batch_size=10,
                               progress=lambda d, t, e: cancel.set() if d >= 10 else None, cancel=cancel)
    # A new run, embedded from scratch: neither the finished float32 run is reused nor its vectors copied.
    assert half.run.id != full.run.id and (half.run.precision, half.copied, half.embedded_now) == ("float16", 0, 10)
    embedded: list[int] = []
    real = indexing.embed_texts
    monkeypatch.setattr(indexing, "embed_texts", lambda lm_, texts, **kw: (embedded.append(len(texts)),
                                                                           real(lm_, texts, **kw))[1])
    # The float32 build is still done (the unfinished float16 run is not its to resume).
    assert build_embedding_run(store, corpus, lm, layer=-1).reused and embedded == []
    resumed = build_embedding_run(store, corpus, half_lm, layer=-1, batch_size=32)
    assert resumed.resumed and resumed.run.id == half.run.id and sum(embedded) == 13
    assert [(s.run.precision, s.state) for s in stored_indexes(store, corpus)] == [
        ("float16", "current"), ("float32", "current")]  # one precision does not supersede the other
    # After an edit, each precision copies only from its own earlier run.
    db.update_document(store, db.document_ids(store, corpus)[0], text="copper engines and a meadow")
    for model, earlier in ((half_lm, half.run.id), (lm, full.run.id)):
        again = build_embedding_run(store, corpus, model, layer=-1, batch_size=32)
        assert (again.copied, again.run.precision) == (22, indexing.precision_of(model))
        assert db.reuse_candidates(store, again.run.id) == [earlier]


def test_load_corpus_index_reuses_importance_and_searches(store, corpus, lm):
    res = build_embedding_run(store, corpus, lm, layer=-1, batch_size=32)
    bundle = load_corpus_index(store, res.run.id, backend="torch")
    index, ids, labels, titles = bundle
    assert ids == db.document_ids(store, corpus)
    assert labels[:3] == ["alpha", "beta", "gamma"] and titles[0] == "Doc 0"
    np.testing.assert_allclose(index.head_importance.score, res.run.importance["score"])
    # A stored document as query finds itself first in the standard space and under MRAG.
    docs = db.get_documents(store, ids[4:5])
    q = embed_texts(lm, [docs[0].text], kind="query", layer=-1)
    assert standard_search(index, q, 3)[0].doc_ids[0] == 4
    assert 4 in mrag_search(index, q, 3, c=5)[0].doc_ids


def test_load_corpus_index_with_another_seed_samples_importance_again(store, corpus, lm):
    res = build_embedding_run(store, corpus, lm, layer=-1, batch_size=32)
    _, emb = load_run_embeddings(store, res.run.id)
    # the stored importance is the seed-0 sample over the stored head vectors
    np.testing.assert_allclose(res.run.importance["score"], head_importance(emb.heads, seed=0).score, rtol=1e-6)
    other = load_corpus_index(store, res.run.id, seed=5).index
    np.testing.assert_allclose(other.head_importance.score, head_importance(emb.heads, seed=5).score, rtol=1e-6)
    np.testing.assert_allclose(other.split_importance.score, head_importance(emb.split(), seed=5).score, rtol=1e-6)
    assert not np.allclose(other.head_importance.spread, res.run.importance["spread"])  # other pairs sampled


def test_load_unfinished_run_is_refused(store, corpus, lm):
    cancel = threading.Event()
    cancel.set()
    res = build_embedding_run(store, corpus, lm, batch_size=5, cancel=cancel)
    assert res.status == "cancelled" and res.embedded_now == 0
    with pytest.raises(ValueError, match="not finished"):
        load_corpus_index(store, res.run.id)


def test_background_job_reports_progress_and_cancels(store, corpus, lm):
    from services.workflows.indexing import BuildJob

    job = BuildJob(store, corpus, lm, layer=-1, batch_size=4)
    job.cancel()  # cancelled before the first batch: nothing embedded, run kept as cancelled
    job.start()
    assert job.wait(60) and job.error is None
    assert job.result.status == "cancelled" and job.result.run.n_saved == 0 and job.total == 23
    job2 = BuildJob(store, corpus, lm, layer=-1, batch_size=4).start()
    assert job2.wait(120) and job2.error is None
    assert job2.result.status == "done" and job2.result.resumed and job2.done == job2.total == 23
    assert job2.result.run.id == job.result.run.id


def test_stored_indexes_states_sizes_and_use(store, corpus, lm):
    first = build_embedding_run(store, corpus, lm, layer=-1, batch_size=8).run
    other = build_embedding_run(store, corpus, lm, layer=0, batch_size=8).run
    doc = db.document_ids(store, corpus)[0]
    db.update_document(store, doc, text="copper engines and a meadow")
    newest = build_embedding_run(store, corpus, lm, layer=-1, batch_size=8).run
    qs = db.create_query_set(store, corpus, "q")
    for run_id in (first.id, first.id, newest.id):
        ev = db.create_eval_run(store, corpus_id=corpus, query_set_id=qs.id)
        db.link_eval_index(store, ev.id, run_id)
    listed = stored_indexes(store, corpus)
    assert [(s.run.id, s.state, s.evaluations) for s in listed] == [
        (newest.id, "current", 1), (other.id, "stale", 0), (first.id, "superseded", 2)]
    assert all(s.size_bytes == 23 * (32 + 4 * 8) * 4 for s in listed)  # float32 standard + 4 heads x 8
    assert listed[0].settings == (corpus, "tiny-bert", 1, "mean")
    cancel = threading.Event()
    cancel.set()
    unfinished = build_embedding_run(store, corpus, lm, layer=0, batch_size=8, cancel=cancel).run
    assert unfinished.n_saved == 22  # the unchanged documents were copied before the first batch
    assert [s.state for s in stored_indexes(store, corpus)][:2] == ["unfinished", "current"]


def test_a_cancelled_rebuild_leaves_the_finished_index_current(store, corpus, lm):
    """Rebuild from scratch, cancelled after a batch: the finished index it would have replaced stays "current"
    (it listed as "superseded", although nothing had replaced it); once the rebuild finishes, it is superseded."""
    finished = build_embedding_run(store, corpus, lm, layer=-1, batch_size=8).run
    cancel = threading.Event()
    rebuild = build_embedding_run(store, corpus, lm, layer=-1, batch_size=8, rebuild=True, cancel=cancel,
                                  progress=lambda d, t, e: cancel.set() if d >= 8 else None)
    assert rebuild.status == "cancelled" and rebuild.run.id != finished.id and rebuild.run.n_saved == 8
    assert [(s.run.id, s.state) for s in stored_indexes(store, corpus)] == [
        (rebuild.run.id, "unfinished"), (finished.id, "current")]
    resumed = build_embedding_run(store, corpus, lm, layer=-1, batch_size=8)  # resumes the newest run: the rebuild
    assert resumed.resumed and resumed.run.id == rebuild.run.id and resumed.status == "done"
    assert [(s.run.id, s.state) for s in stored_indexes(store, corpus)] == [
        (rebuild.run.id, "current"), (finished.id, "superseded")]


def _silence(store, model, run_id: int, seconds: float) -> None:
    """Make a run's last heartbeat ``seconds`` old, as if its process had stopped beating that long ago."""
    from datetime import timedelta

    from sqlalchemy import update

    from db.models import utcnow

    with store.session() as session:
        session.execute(update(model).where(model.id == run_id)
                        .values(heartbeat_at=utcnow() - timedelta(seconds=seconds)))


@pytest.mark.every_backend
def test_a_build_another_process_works_on_is_refused_until_it_falls_silent(store, corpus, lm):
    import os
    import socket

    from db.models import EmbeddingRun

    cancel = threading.Event()
    first = build_embedding_run(store, corpus, lm, layer=0, batch_size=5, cancel=cancel,
                                progress=lambda done, total, eta: cancel.set() if done >= 5 else None)
    assert first.run.status == "cancelled" and first.run.owner.startswith(f"{socket.gethostname()} pid {os.getpid()} #")
    assert first.run.heartbeat_at is not None and not first.run.live

    other = "gpu-box pid 4242 #0badc0de"
    db.claim_embedding_run(store, first.run.id, other)  # e.g. `mrag-studio index` on the GPU box
    assert run_state(store, db.get_embedding_run(store, first.run.id)) == "building"
    assert [s.state for s in stored_indexes(store, corpus) if s.run.id == first.run.id] == ["building"]
    with pytest.raises(db.RunInProgressError, match=r"Index \d+ is running in another process \(gpu-box pid 4242;"):
        build_embedding_run(store, corpus, lm, layer=0, batch_size=5)
    assert db.get_embedding_run(store, first.run.id).n_saved == 5  # nothing written by the refused build

    _silence(store, EmbeddingRun, first.run.id, db.LIVE_WINDOW_S + 1)  # that process died
    assert run_state(store, db.get_embedding_run(store, first.run.id)) == "partial"
    assert [s.state for s in stored_indexes(store, corpus) if s.run.id == first.run.id] == ["unfinished"]
    second = build_embedding_run(store, corpus, lm, layer=0, batch_size=5)
    assert second.status == "done" and second.resumed and second.run.id == first.run.id
    assert second.run.owner != other and not second.run.live


def _run(run_id: int, layer: int, model: str = "minilm", pooling: str = "mean", precision: str = "float32"):
    from datetime import datetime, timezone

    return db.EmbeddingRunInfo(id=run_id, corpus_id=1, corpus_version=1, model_name=model, model_path="", layer=layer,
                               pooling=pooling, precision=precision, n_docs=3, n_heads=2, head_dim=4, dim=8,
                               status="done", timings={}, importance=None, error="",
                               created_at=datetime(2026, 1, 1, tzinfo=timezone.utc), finished_at=None, n_saved=3)


def test_preferred_index_by_hand():
    from services.workflows.indexing import preferred_index

    sweep = [_run(3, 3), _run(2, 0), _run(1, 5)]  # newest first, as the pages list them: a sweep asked 5, 0, 3
    assert preferred_index(sweep, set()).id == 1  # the last layer, though layer 3 was built last
    assert preferred_index(sweep, {1}).id == 3  # layer 5's index is stale: the deepest current one
    assert preferred_index(sweep, {1, 2, 3}).id == 1  # all stale: chosen among all
    assert preferred_index([_run(5, 5), _run(4, 5)], set()).id == 5  # same layer: the newest
    mixed = [_run(9, 12, model="smollm2", pooling="last"), _run(8, 29, model="smollm2", pooling="last"),
             _run(7, 5)]
    assert preferred_index(mixed, set()).id == 8  # the newest index's model, its deepest layer
    assert preferred_index([_run(2, 1, pooling="first"), _run(1, 5)], set()).id == 2  # newest pooling wins
    assert preferred_index([_run(2, 1, precision="float16"), _run(1, 5)], set()).id == 2
    with pytest.raises(ValueError, match="no index"):
        preferred_index([], set())


def test_query_window_counts_the_tokens_embedding_reads(lm):
    """A query of 6 words is 8 tokens with [CLS] and [SEP]: a model reading 5 leaves its end out; 3 words fit
    exactly. The word tokenizer gives no character offsets, so the note names tokens only."""
    short = dataclasses.replace(lm, spec=dataclasses.replace(lm.spec, max_length=5))
    window = query_window(short, "river bread tax harbor orbit fern")
    assert (window.n_tokens, window.limit, window.length, window.chars_read, window.cut) == (8, 5, 33, None, True)
    assert window.note("river bread tax harbor orbit fern", "tiny") == (
        "The query is 8 tokens long and tiny reads at most 5: its embedding is made from its first 5 tokens; the rest "
        "is left out.")
    fits = query_window(short, "river bread tax")
    assert (fits.n_tokens, fits.cut, fits.chars_read) == (5, False, 15) and fits.note("river bread tax", "tiny") is None
