"""Stored indexes in Milvus Lite (the real engine): built from the store, searched like the in-process index,
updated by writing only changed documents, dropped with their index or corpus, refused to a second builder, and
resumed after a failure or a kill midway with the store untouched."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import db
from mrag_core import milvus_backend as mb
from mrag_core.extraction import embed_texts, split_vectors
from mrag_core.importance import head_importance
from mrag_core.strategies import mrag_search, split_search, standard_search
from services.workflows import milvus_sync
from services.workflows.indexing import build_embedding_run, load_corpus_index
from tests.services.workflows.test_indexing import doc_text, tiny_lm

QUERIES = ["river bread quantum", "violin glacier tax harbor", "opera cipher", "falcon marble pepper engine n3"]


@pytest.fixture(scope="module")
def lite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("milvus") / "lite.db")


@pytest.fixture(autouse=True)
def milvus_env(lite_uri: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(mb.ENV_URI, lite_uri)
    return lite_uri


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


@pytest.fixture
def corpus(store) -> int:
    c = db.create_corpus(store, "tiny")
    db.add_categories(store, c.id, ["alpha", "beta", "gamma"])
    db.add_documents(store, c.id, [{"title": f"Doc {i}", "text": f"{doc_text(i)} n{i}",
                                    "label": ("alpha", "beta", "gamma")[i % 3]} for i in range(23)])
    return c.id


def same_results(store, run_id: int, lm) -> None:
    """Every strategy on the run's Milvus collections returns the in-process (torch) answer."""
    milvus = load_corpus_index(store, run_id, backend="milvus")
    exact = load_corpus_index(store, run_id, backend="torch")
    assert milvus.doc_ids == exact.doc_ids
    q = embed_texts(lm, QUERIES, kind="query")
    for a, b in zip(standard_search(milvus.index, q, 5), standard_search(exact.index, q, 5)):
        assert a.doc_ids == b.doc_ids
    for a, b in zip(mrag_search(milvus.index, q, 5, 8), mrag_search(exact.index, q, 5, 8)):
        assert a.doc_ids == b.doc_ids
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-4)
    for a, b in zip(split_search(milvus.index, q, 5, 8), split_search(exact.index, q, 5, 8)):
        assert a.doc_ids == b.doc_ids


def names_of(store, run, backend: str = "milvus") -> list[str]:
    base = milvus_sync.base_name(milvus_sync.namespace(store), run, backend)
    return [f"{base}_{v}" for v in milvus_sync.VIEWS]


def test_a_run_builds_collections_that_search_like_the_in_process_index(store, corpus, lm, milvus_env):
    run = build_embedding_run(store, corpus, lm).run
    with pytest.raises(mb.MilvusNotReadyError, match="no Milvus collections yet"):
        load_corpus_index(store, run.id, backend="milvus")
    seen: list[tuple[int, int]] = []
    res = milvus_sync.sync_run_collections(store, run.id, progress=lambda d, t: seen.append((d, t)), batch_size=10)
    assert (res.status, res.written, res.deleted, res.n_docs) == ("done", 23, 0, 23)
    assert seen == [(10, 23), (20, 23), (23, 23)]
    assert milvus_sync.collection_state(store, run, "milvus") == "ready"
    same_results(store, run.id, lm)
    index = load_corpus_index(store, run.id, backend="milvus").index
    held = [v for view in (index.standard, index.heads, index.split) for v in vars(view).values()
            if isinstance(v, np.ndarray)]
    assert [a.shape for a in held] == [(23,)] * 3  # the document ids, no vectors
    again = milvus_sync.sync_run_collections(store, run.id)
    assert (again.status, again.written) == ("reused", 0)


def test_split_importance_is_stored_with_the_run(store, corpus, lm):
    run = build_embedding_run(store, corpus, lm).run
    _, std, _ = db.load_vectors(store, run.id)
    want = head_importance(split_vectors(std, run.n_heads))
    np.testing.assert_allclose(run.importance["split"]["score"], want.score, rtol=1e-9)


def test_hnsw_collections_are_calibrated_and_searchable(store, corpus, lm):
    run = build_embedding_run(store, corpus, lm).run
    assert milvus_sync.sync_run_collections(store, run.id, "milvus-hnsw").status == "done"
    index = load_corpus_index(store, run.id, backend="milvus-hnsw").index
    assert index.heads.calibration is not None and set(index.heads.vote_calibrations) >= {"importance", "decay"}
    assert index.calibration_lines()
    q = embed_texts(lm, QUERIES, kind="query")
    assert all(len(r.doc_ids) == 5 for r in mrag_search(index, q, 5, 8))


def test_an_update_writes_only_the_changed_documents(store, corpus, lm):
    first = build_embedding_run(store, corpus, lm).run
    milvus_sync.sync_run_collections(store, first.id)
    ids = db.document_ids(store, corpus)
    db.update_document(store, ids[4], text="an edited text about copper meadows")
    db.add_documents(store, corpus, [{"title": "New A", "text": "fern saddle lantern"},
                                     {"title": "New B", "text": "tide falcon orbit"}])
    db.delete_documents(store, corpus, [ids[7]])
    second = build_embedding_run(store, corpus, lm)
    assert second.embedded_now == 3 and second.run.id != first.id
    res = milvus_sync.sync_run_collections(store, second.run.id)
    assert res.adopted_from == first.id
    assert (res.written, res.deleted, res.n_docs) == (3, 3, 24)  # 1 edited + 2 new; 1 deleted, in each of 3 views
    assert milvus_sync.collection_state(store, first, "milvus") == "missing"  # taken over
    same_results(store, second.run.id, lm)


def test_deleting_an_index_or_its_corpus_drops_its_collections(store, corpus, lm):
    client = mb.connect(mb.config_from_env())
    run = build_embedding_run(store, corpus, lm).run
    milvus_sync.sync_run_collections(store, run.id)
    other = db.create_corpus(store, "other")
    db.add_documents(store, other.id, [{"title": f"O{i}", "text": f"{doc_text(100 + i)} o{i}"} for i in range(5)])
    kept = build_embedding_run(store, other.id, lm).run
    milvus_sync.sync_run_collections(store, kept.id)
    db.delete_embedding_run(store, run.id)
    assert milvus_sync.drop_orphans(store) is None
    assert not any(client.has_collection(n) for n in names_of(store, run))
    assert all(client.has_collection(n) for n in names_of(store, kept))
    db.delete_corpus(store, other.id)
    milvus_sync.drop_orphans(store)
    assert not any(client.has_collection(n) for n in names_of(store, kept))


def test_a_second_builder_is_refused_by_the_lease(store, corpus, lm):
    run = build_embedding_run(store, corpus, lm).run
    base = milvus_sync.base_name(milvus_sync.namespace(store), run, "milvus")
    db.take_lease(store, f"milvus:{base}", "elsewhere pid 1 #abcd", milvus_sync.LEASE_KIND, run.id)
    with pytest.raises(db.RunInProgressError, match="already running in another process"):
        milvus_sync.sync_run_collections(store, run.id)


def test_an_insert_that_fails_midway_leaves_the_index_unready_and_resumes(store, corpus, lm):
    run = build_embedding_run(store, corpus, lm).run

    def fail_after_two_batches(done: int, total: int) -> None:
        if done >= 10:
            raise ConnectionError("the network went away")

    with pytest.raises(ConnectionError):
        milvus_sync.sync_run_collections(store, run.id, progress=fail_after_two_batches, batch_size=5)
    assert milvus_sync.collection_state(store, run, "milvus") == "building"
    with pytest.raises(mb.MilvusNotReadyError, match="not ready"):
        load_corpus_index(store, run.id, backend="milvus")
    after = db.get_embedding_run(store, run.id)
    assert (after.status, after.n_saved) == ("done", 23)  # the store is as it was
    res = milvus_sync.sync_run_collections(store, run.id, batch_size=5)
    assert (res.status, res.written) == ("done", 13)  # the 10 written before the failure are not written again
    same_results(store, run.id, lm)


def test_a_process_killed_midway_leaves_collections_that_resume(tmp_path: Path, monkeypatch, lm):
    """A child process builds the collections and is killed (SIGKILL) after two batches; this process resumes."""
    url = f"sqlite:///{tmp_path / 'k.db'}"
    lite = str(tmp_path / "killed.db")
    store = db.open_store(url)
    c = db.create_corpus(store, "k")
    db.add_documents(store, c.id, [{"title": f"D{i}", "text": f"{doc_text(i)} k{i}"} for i in range(23)])
    run = build_embedding_run(store, c.id, lm).run
    child = textwrap.dedent(f"""
        import os, signal, db
        from services.workflows import milvus_sync
        store = db.open_store({url!r})
        def die(done, total):
            if done >= 10:
                os.kill(os.getpid(), signal.SIGKILL)
        milvus_sync.sync_run_collections(store, {run.id}, progress=die, batch_size=5)
    """)
    env = {**os.environ, mb.ENV_URI: lite, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    monkeypatch.setenv(mb.ENV_URI, lite)
    assert milvus_sync.collection_state(store, run, "milvus") == "building"
    base = milvus_sync.base_name(milvus_sync.namespace(store), run, "milvus")
    assert db.lease_holder(store, f"milvus:{base}") is not None  # the killed builder's, fresh for a minute
    db.clear_marker(store, f"milvus:{base}")  # as if that minute had passed
    res = milvus_sync.sync_run_collections(store, run.id, batch_size=5)
    assert res.status == "done" and res.written <= 13
    same_results(store, run.id, lm)
    store.close()


def test_an_unreachable_milvus_is_one_clear_error(store, corpus, lm, monkeypatch):
    run = build_embedding_run(store, corpus, lm).run
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(mb.ENV_URI, f"http://127.0.0.1:{port}")
    with pytest.raises(mb.MilvusUnavailableError, match=f"Milvus at http://127.0.0.1:{port} cannot be reached"):
        load_corpus_index(store, run.id, backend="milvus")
    with pytest.raises(mb.MilvusUnavailableError):
        milvus_sync.sync_run_collections(store, run.id)


def test_an_older_run_does_not_take_a_newer_runs_collections(store, corpus, lm):
    first = build_embedding_run(store, corpus, lm).run
    second = build_embedding_run(store, corpus, lm, rebuild=True).run  # same settings, newer
    milvus_sync.sync_run_collections(store, second.id)
    res = milvus_sync.sync_run_collections(store, first.id)
    assert (res.adopted_from, res.written) == (None, 23)  # built anew
    assert milvus_sync.collection_state(store, second, "milvus") == "ready"


def test_a_milvus_server_reached_by_http_uri_serves_the_same_answers(store, corpus, lm, monkeypatch,
                                                                     tmp_path: Path):
    """The server path (``http://host:port``, as a standalone Milvus or a cluster is reached): Milvus Lite's own
    server process on 127.0.0.1 is written to and searched over gRPC, and answers as the in-process index does;
    the collections outlive a restart of the server."""

    def serve(port: int) -> subprocess.Popen:
        server = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir",
                                   str(tmp_path / "served.db"), "--host", "127.0.0.1", "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(240):  # until it listens (starting takes seconds on a loaded machine)
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return server
            assert server.poll() is None, "the Milvus Lite server exited"
            time.sleep(0.5)
        server.kill()
        raise AssertionError("the Milvus Lite server did not listen within 120 s")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(mb.ENV_URI, f"http://127.0.0.1:{port}")
    server = serve(port)
    try:
        run = build_embedding_run(store, corpus, lm).run
        res = milvus_sync.sync_run_collections(store, run.id)
        assert (res.status, res.written) == ("done", 23)
        same_results(store, run.id, lm)
    finally:
        server.terminate()
        server.wait(60)
    server = serve(port)  # restarted on the same folder: the collections are still there, and ready
    try:
        assert milvus_sync.collection_state(store, run, "milvus") == "ready"
        same_results(store, run.id, lm)
    finally:
        server.terminate()
        server.wait(60)
