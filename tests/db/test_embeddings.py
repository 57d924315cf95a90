"""Embedding runs, vectors (bit-exact, resumable) and projections."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import numpy as np
import pytest

import db
from db import Store

H, HD, D = 3, 4, 12


def _run(store: Store, corpus_id: int, **kw: object) -> db.EmbeddingRunInfo:
    args: dict[str, object] = dict(
        model_name="tiny-lm", layer=-1, pooling="last", n_heads=H, head_dim=HD, dim=D
    )
    args.update(kw)
    return db.create_embedding_run(store, corpus_id, **args)  # type: ignore[arg-type]


def _vectors(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((n, D)).astype(np.float32),
        rng.standard_normal((n, H, HD)).astype(np.float32),
    )


def test_run_round_trip(store: Store, corpus: db.CorpusInfo) -> None:
    run = _run(store, corpus.id, model_path="/models/tiny")
    assert (run.status, run.corpus_version, run.n_docs, run.n_saved) == ("running", corpus.version, 4, 0)
    assert (run.model_path, run.n_heads, run.head_dim, run.dim, run.precision) == ("/models/tiny", H, HD, D, "float32")
    assert db.get_embedding_run(store, run.id) == run
    assert [r.id for r in db.list_embedding_runs(store, corpus.id)] == [run.id]
    assert db.list_embedding_runs(store, corpus.id, status="done") == []  # still running
    done = db.finish_embedding_run(store, _run(store, corpus.id).id)
    assert [r.id for r in db.list_embedding_runs(store, corpus.id)] == [done.id, run.id]  # newest first
    assert [r.id for r in db.list_embedding_runs(store, corpus.id, status="done")] == [done.id]
    assert [r.id for r in db.list_embedding_runs(store, corpus.id, status="running")] == [run.id]
    with pytest.raises(db.InvalidInputError):
        db.list_embedding_runs(store, corpus.id, status="finished")
    with pytest.raises(db.InvalidInputError):
        _run(store, corpus.id, n_heads=0)
    with pytest.raises(db.InvalidInputError, match="Unknown precision 'fp8'"):
        _run(store, corpus.id, precision="fp8")
    with pytest.raises(db.NotFoundError):
        _run(store, 999)


def test_vectors_round_trip_bit_exact_and_resumable(
    store: Store, corpus: db.CorpusInfo, docs: list[int],
) -> None:
    run = _run(store, corpus.id)
    std, heads = _vectors(4, seed=1)
    std[0, 0] = -0.0
    std[0, 1] = np.float32(1e-42)  # a subnormal
    std[0, 2] = np.finfo(np.float32).max

    assert db.missing_documents(store, run.id) == docs
    assert db.save_vectors(store, run.id, docs[:2], std[:2], heads[:2]) == 2  # batch 1
    assert db.missing_documents(store, run.id) == docs[2:]
    assert db.get_embedding_run(store, run.id).n_saved == 2
    # Re-saving a batch (e.g. after a crash) replaces, never duplicates.
    db.save_vectors(store, run.id, docs[1:], std[1:], heads[1:])
    assert db.missing_documents(store, run.id) == []

    ids, got_std, got_heads = db.load_vectors(store, run.id)
    assert ids.dtype == np.int64 and ids.tolist() == docs
    assert got_std.dtype == np.float32 and got_std.shape == (4, D)
    assert got_heads.shape == (4, H, HD)
    assert got_std.tobytes() == std.tobytes()  # bit-exact, incl. -0.0 and subnormals
    assert got_heads.tobytes() == heads.tobytes()
    got_std[0] += 1  # writable arrays

    sub_ids, sub_std, _ = db.load_vectors(store, run.id, doc_ids=[docs[3], docs[1]])
    assert sub_ids.tolist() == [docs[1], docs[3]]  # always ordered by document id
    assert sub_std.tobytes() == std[[1, 3]].tobytes()


def test_float64_input_is_stored_as_float32(
    store: Store, corpus: db.CorpusInfo, docs: list[int],
) -> None:
    run = _run(store, corpus.id)
    std = np.linspace(0, 1, 4 * D).reshape(4, D)
    heads = np.linspace(-1, 1, 4 * H * HD).reshape(4, H, HD)
    db.save_vectors(store, run.id, docs, std, heads)
    _, got_std, got_heads = db.load_vectors(store, run.id)
    assert np.array_equal(got_std, std.astype(np.float32))
    assert np.array_equal(got_heads, heads.astype(np.float32))


def test_empty_run_loads_empty_arrays(store: Store, corpus: db.CorpusInfo) -> None:
    run = _run(store, corpus.id)
    ids, std, heads = db.load_vectors(store, run.id)
    assert ids.shape == (0,) and std.shape == (0, D) and heads.shape == (0, H, HD)


def test_save_vectors_validation(
    store: Store, corpus: db.CorpusInfo, docs: list[int], count_rows: Callable[[str], int],
) -> None:
    run = _run(store, corpus.id)
    other = db.create_corpus(store, "Other")
    (foreign,) = db.add_documents(store, other.id, [{"text": "elsewhere"}]).document_ids
    std, heads = _vectors(2, seed=2)
    with pytest.raises(db.InvalidInputError, match="standard vectors have shape"):
        db.save_vectors(store, run.id, docs[:2], std[:, :5], heads)
    with pytest.raises(db.InvalidInputError, match="head vectors have shape"):
        db.save_vectors(store, run.id, docs[:2], std, heads.reshape(2, 1, H * HD))
    with pytest.raises(db.InvalidInputError, match="not in this run's corpus"):
        db.save_vectors(store, run.id, [docs[0], foreign], std, heads)
    with pytest.raises(db.InvalidInputError, match="same document id twice"):
        db.save_vectors(store, run.id, [docs[0], docs[0]], std, heads)
    std[1, 3] = np.nan
    with pytest.raises(db.InvalidInputError, match="NaN"):
        db.save_vectors(store, run.id, docs[:2], std, heads)
    assert count_rows("embedding_vectors") == 0


def test_finish_latest_and_staleness(
    store: Store, corpus: db.CorpusInfo, docs: list[int], cats: dict[str, int],
) -> None:
    old = _run(store, corpus.id)
    db.finish_embedding_run(store, old.id, status="done")
    new = _run(store, corpus.id)
    _run(store, corpus.id, layer=5)
    _run(store, corpus.id, model_name="other")
    assert db.latest_embedding_run(store, corpus.id, "tiny-lm", -1, "last").id == new.id
    assert db.latest_embedding_run(store, corpus.id, "tiny-lm", -1, "last", statuses=["done"]).id == old.id
    assert db.latest_embedding_run(store, corpus.id, "tiny-lm", -1, "mean") is None
    assert db.latest_embedding_run(store, corpus.id, "tiny-lm", -1, "last", precision="float16") is None
    half = _run(store, corpus.id, precision="float16")
    assert db.latest_embedding_run(store, corpus.id, "tiny-lm", -1, "last", precision="float16").id == half.id
    assert db.latest_embedding_run(store, corpus.id, "tiny-lm", -1, "last", precision="float32").id == new.id
    assert db.latest_embedding_run(store, corpus.id, "tiny-lm", -1, "last").id == half.id  # any precision

    importance = {"norm": np.array([1.0, 2.0, 3.0]), "spread": [0.1, 0.2, 0.3], "score": np.float32(0.5)}
    done = db.finish_embedding_run(store, new.id, importance=importance, timings={"embed_s": 1.5})
    done = db.finish_embedding_run(store, new.id, timings={"total_s": 2.0})
    assert done.status == "done" and done.finished_at is not None
    assert done.importance == {"norm": [1.0, 2.0, 3.0], "spread": [0.1, 0.2, 0.3], "score": 0.5}
    assert done.timings == {"embed_s": 1.5, "total_s": 2.0}
    with pytest.raises(db.InvalidInputError):
        db.finish_embedding_run(store, new.id, status="running")

    db.set_embedding_run_status(store, new.id, "running")  # resume
    assert db.get_embedding_run(store, new.id).finished_at is None
    db.set_embedding_run_status(store, new.id, "failed", error="OOM")
    assert (db.get_embedding_run(store, new.id).status, db.get_embedding_run(store, new.id).error) == ("failed", "OOM")

    assert not db.is_stale(store, new)
    db.decide_label(store, docs[0], cats["sport"], "ann", 1)
    assert not db.is_stale(store, new.id)  # labels do not change embeddings
    db.add_documents(store, corpus.id, [{"text": "a brand new document"}])
    assert db.is_stale(store, new)
    assert not db.is_stale(store, _run(store, corpus.id))


def test_delete_run_cascades(
    store: Store, corpus: db.CorpusInfo, docs: list[int], count_rows: Callable[[str], int],
) -> None:
    run = _run(store, corpus.id)
    std, heads = _vectors(4, seed=3)
    db.save_vectors(store, run.id, docs, std, heads)
    db.save_projection(store, run.id, "standard", "pca", np.zeros((4, 2)), docs)
    db.delete_embedding_run(store, run.id)
    assert count_rows("embedding_vectors") == 0 and count_rows("projections") == 0
    with pytest.raises(db.NotFoundError):
        db.get_embedding_run(store, run.id)


def test_deleting_a_document_drops_its_vectors(
    store: Store, corpus: db.CorpusInfo, docs: list[int],
) -> None:
    run = _run(store, corpus.id)
    std, heads = _vectors(4, seed=4)
    db.save_vectors(store, run.id, docs, std, heads)
    db.delete_documents(store, corpus.id, [docs[1]])
    ids, got, _ = db.load_vectors(store, run.id)
    assert ids.tolist() == [docs[0], docs[2], docs[3]]
    assert got.tobytes() == std[[0, 2, 3]].tobytes()


# --------------------------------------------------------------------------- projections


def test_projection_round_trip_and_lookup(
    store: Store, corpus: db.CorpusInfo, docs: list[int],
) -> None:
    run = _run(store, corpus.id)
    coords = np.random.default_rng(5).standard_normal((4, 2)).astype(np.float32)
    reducer_blob = pickle.dumps({"fitted": [1, 2, 3]})
    order = [docs[2], docs[0], docs[3], docs[1]]
    info = db.save_projection(
        store, run.id, "head:2", "umap", coords, order,
        params={"n_neighbors": 15, "min_dist": 0.1}, seed=42, model_blob=reducer_blob,
    )
    assert (info.space, info.method, info.seed, info.n_points, info.has_model) == ("head:2", "umap", 42, 4, True)
    loaded = db.load_projection(store, info.id)
    assert loaded.doc_ids == order
    assert loaded.coords.tobytes() == coords.tobytes()
    assert loaded.model_blob == reducer_blob
    assert loaded.info == info

    newer = db.save_projection(store, run.id, "head:2", "umap", coords * 2, order, params={"n_neighbors": 30}, seed=42)
    pca = db.save_projection(store, run.id, "standard", "pca", coords, order)
    found = db.find_projection(store, run.id, "head:2", "umap", params={"min_dist": 0.1, "n_neighbors": 15})
    assert found is not None and found.info.id == info.id
    assert db.find_projection(store, run.id, "head:2", "umap").info.id == newer.id  # type: ignore[union-attr]
    assert db.find_projection(store, run.id, "head:2", "umap", seed=7) is None
    assert db.find_projection(store, run.id, "head:1", "umap") is None
    assert [p.id for p in db.list_projections(store, run.id)] == [pca.id, newer.id, info.id]
    db.delete_projection(store, info.id)
    with pytest.raises(db.NotFoundError):
        db.load_projection(store, info.id)


def test_projection_validation(store: Store, corpus: db.CorpusInfo, docs: list[int]) -> None:
    run = _run(store, corpus.id)
    xy = np.zeros((4, 2))
    with pytest.raises(db.InvalidInputError, match="head:<0..2>"):
        db.save_projection(store, run.id, f"head:{H}", "umap", xy, docs)
    with pytest.raises(db.InvalidInputError, match="Space"):
        db.save_projection(store, run.id, "heads", "umap", xy, docs)
    with pytest.raises(db.InvalidInputError, match="method"):
        db.save_projection(store, run.id, "standard", "tsne", xy, docs)
    with pytest.raises(db.InvalidInputError, match="shape"):
        db.save_projection(store, run.id, "standard", "pca", np.zeros((3, 2)), docs)
    with pytest.raises(db.NotFoundError):
        db.save_projection(store, 999, "standard", "pca", xy, docs)


def test_copy_unchanged_vectors_takes_only_documents_with_the_same_text(
    store: Store, corpus: db.CorpusInfo, docs: list[int],
) -> None:
    old = _run(store, corpus.id, model_path="/models/tiny")
    std, heads = _vectors(4, seed=3)
    db.save_vectors(store, old.id, docs, std, heads)
    db.finish_embedding_run(store, old.id)
    db.update_document(store, docs[1], text="an edited text")  # its vectors no longer describe it
    db.delete_documents(store, corpus.id, [docs[2]])
    (added,) = db.add_documents(store, corpus.id, [{"text": "a brand-new document"}]).document_ids
    assert db.is_stale(store, old.id)

    assert db.unchanged_documents(store, old.id) == 2  # docs[0] and docs[3]
    new = _run(store, corpus.id, model_path="/models/tiny")
    assert db.reuse_candidates(store, new.id) == [old.id]
    mine_std, mine_heads = _vectors(1, seed=4)
    db.save_vectors(store, new.id, [docs[3]], mine_std, mine_heads)  # already held: kept, not replaced
    assert db.copy_unchanged_vectors(store, old.id, new.id) == 1  # docs[0]
    assert db.missing_documents(store, new.id) == [docs[1], added]
    ids, got_std, got_heads = db.load_vectors(store, new.id)
    assert ids.tolist() == [docs[0], docs[3]]
    assert got_std[0].tobytes() == std[0].tobytes() and got_heads[0].tobytes() == heads[0].tobytes()
    assert got_std[1].tobytes() == mine_std[0].tobytes()
    assert db.copy_unchanged_vectors(store, old.id, new.id) == 0  # nothing left to copy
    # Saved vectors carry the hash of the text they came from: the edited document's new vectors are reusable.
    db.save_vectors(store, new.id, [docs[1]], *_vectors(1, seed=5))
    newer = _run(store, corpus.id, model_path="/models/tiny")
    assert [db.copy_unchanged_vectors(store, r, newer.id) for r in db.reuse_candidates(store, newer.id)] == [3, 0]


def test_copy_unchanged_vectors_refuses_other_settings(store: Store, corpus: db.CorpusInfo, docs: list[int]) -> None:
    base = _run(store, corpus.id)
    db.save_vectors(store, base.id, docs, *_vectors(4, seed=6))
    for other in (dict(layer=2), dict(pooling="mean"), dict(model_name="other"), dict(model_path="/elsewhere"),
                  dict(precision="float16")):
        run = _run(store, corpus.id, **other)
        assert db.reuse_candidates(store, run.id) == []
        with pytest.raises(db.InvalidInputError, match="not interchangeable"):
            db.copy_unchanged_vectors(store, base.id, run.id)
    with pytest.raises(db.InvalidInputError, match="2 content hashes for 1 documents"):
        db.save_vectors(store, base.id, docs[:1], *_vectors(1, seed=7), content_hashes=["a", "b"])
