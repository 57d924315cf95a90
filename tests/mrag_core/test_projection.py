"""Projections: PCA maps computed once per run and space, stored with their reducer, queries placed
by the fitted transform; one seeded UMAP test (slow: numba JIT)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import db
from mrag_core.extraction import Embeddings
from mrag_core.projection import (
    PCA2,
    Reducer,
    default_params,
    ensure_maps,
    fit_projection,
    forget_maps_without_model,
    place_query,
    space_vectors,
)


def clustered(n_per: int = 10, d: int = 16, heads: int = 3, seed: int = 0) -> Embeddings:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(3, d)) * 4
    std = np.vstack([c + rng.normal(size=(n_per, d)) for c in centers]).astype(np.float32)
    hd = rng.normal(size=(3 * n_per, heads, 8)).astype(np.float32)
    return Embeddings(std, hd)


@pytest.fixture
def store_run(tmp_path: Path):
    store = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    c = db.create_corpus(store, "maps")
    emb = clustered()
    ids = db.add_documents(store, c.id, [{"title": f"d{i}", "text": f"text {i}"} for i in range(len(emb))]).document_ids
    run = db.create_embedding_run(store, c.id, model_name="fake", layer=0, pooling="mean", n_heads=3, head_dim=8,
                                  dim=16)
    db.save_vectors(store, run.id, ids, emb.standard, emb.heads)
    db.finish_embedding_run(store, run.id)
    yield store, run, ids, emb
    store.close()


def test_pca_matches_svd_and_separates_clusters():
    emb = clustered()
    coords, red = fit_projection(emb.standard, "pca")
    assert coords.shape == (30, 2) and coords.dtype == np.float32
    # the three clusters stay apart: each point's nearest neighbour in 2-D is in its own cluster
    d = np.linalg.norm(coords[:, None] - coords[None], axis=2)
    np.fill_diagonal(d, np.inf)
    assert np.mean(d.argmin(axis=1) // 10 == np.arange(30) // 10) > 0.9
    # transform of the training vectors equals the fitted coordinates; variance is ordered
    np.testing.assert_allclose(red.transform(emb.standard), coords, atol=1e-5)
    ev = red.model.explained_variance_ratio_
    assert ev[0] >= ev[1] > 0
    x = np.random.default_rng(1).normal(size=(20, 5))
    p = PCA2().fit(x)
    assert abs(float(np.dot(p.components_[0], p.components_[1]))) < 1e-9


def test_maps_are_stored_once_with_reducer_and_reused(store_run, monkeypatch):
    store, run, ids, emb = store_run
    seen: list[tuple[int, int]] = []
    maps = ensure_maps(store, run.id, "pca", progress=lambda d, t: seen.append((d, t)))
    assert list(maps) == ["standard", "head:0", "head:1", "head:2"] and seen[-1] == (4, 4)
    assert all(not m.from_store for m in maps.values())
    assert len(db.list_projections(store, run.id)) == 4
    info = db.find_projection(store, run.id, "head:1", "pca", seed=0)
    assert info is not None and info.doc_ids == ids and info.model_blob is not None
    np.testing.assert_allclose(info.coords, maps["head:1"].coords)

    import mrag_core.projection as proj

    def boom(*a, **k):
        raise AssertionError("refitted a stored projection")

    monkeypatch.setattr(proj, "fit_projection", boom)
    again = ensure_maps(store, run.id, "pca")
    assert all(m.from_store for m in again.values()) and len(db.list_projections(store, run.id)) == 4
    # the stored reducer places a document's own vector on that document's point
    q = Embeddings(emb.standard[5:6], emb.heads[5:6])
    placed = place_query(again, q)
    for space, m in again.items():
        np.testing.assert_allclose(placed[space], m.coords[5], atol=1e-4)
    np.testing.assert_allclose(space_vectors(q, "head:2"), emb.heads[5:6, 2])


def test_a_reducer_too_large_for_the_database_is_left_out_not_fatal(store_run, monkeypatch):
    """The map is stored and drawn; its model is not, so no query is placed on it, now or later."""
    store, run, ids, emb = store_run
    monkeypatch.setattr(type(store), "largest_value_bytes", lambda self: 100)  # a PCA model is ~0.5 KB
    maps = ensure_maps(store, run.id, "pca", spaces=["standard"])
    fresh = maps["standard"]
    assert fresh.reducer is None and len(fit_projection(emb.standard, "pca")[1].dumps()) > 100
    stored = db.find_projection(store, run.id, "standard", "pca", seed=0)
    assert stored.model_blob is None and stored.doc_ids == ids
    np.testing.assert_allclose(stored.coords, fresh.coords)
    again = ensure_maps(store, run.id, "pca", spaces=["standard"])["standard"]
    assert again.from_store and again.reducer is None
    assert place_query({"standard": fresh}, Embeddings(emb.standard[:1], emb.heads[:1])) == {}


def test_maps_stored_without_their_model_are_refitted_once_the_database_takes_it(store_run, monkeypatch):
    """After the limit is raised (MySQL: max_allowed_packet), forgetting the model-less maps lets ensure_maps fit
    and store them again with their models; maps that kept their model, and other methods or seeds, stay."""
    store, run, ids, emb = store_run
    ensure_maps(store, run.id, "pca", spaces=["head:0"])  # stored with its model
    ensure_maps(store, run.id, "pca", spaces=["head:0"], seed=3)
    with monkeypatch.context() as m:
        m.setattr(type(store), "largest_value_bytes", lambda self: 100)
        ensure_maps(store, run.id, "pca", spaces=["standard", "head:1"])
        ensure_maps(store, run.id, "pca", spaces=["standard"], seed=3)
    before = {(p.space, p.seed): p.id for p in db.list_projections(store, run.id)}
    assert len(before) == 5
    assert forget_maps_without_model(store, run.id, "umap") == []  # other method: nothing
    assert sorted(forget_maps_without_model(store, run.id, "pca", spaces=["head:1", "head:0"])) == ["head:1"]
    assert sorted(forget_maps_without_model(store, run.id, "pca")) == ["standard"]
    left = {(p.space, p.seed): p.id for p in db.list_projections(store, run.id)}
    assert left == {k: v for k, v in before.items() if k in {("head:0", 0), ("head:0", 3), ("standard", 3)}}
    maps = ensure_maps(store, run.id, "pca", spaces=["standard", "head:1", "head:0"])
    assert [maps[s].from_store for s in ("standard", "head:1", "head:0")] == [False, False, True]
    placed = place_query(maps, Embeddings(emb.standard[5:6], emb.heads[5:6]))
    assert set(placed) == {"standard", "head:1", "head:0"}
    np.testing.assert_allclose(placed["head:1"], maps["head:1"].coords[5], atol=1e-4)
    assert all(p.has_model for p in db.list_projections(store, run.id) if p.seed == 0)


def test_largest_value_bytes_is_what_mysql_takes(mysql_server):
    """On MariaDB through PyMySQL a BLOB of ``largest_value_bytes`` is stored; one of the server's
    max_allowed_packet less 64 KiB is not (PyMySQL sends bytes hex-encoded), and nothing is half-written."""
    from sqlalchemy import text

    with mysql_server.store() as store:
        with store.engine.connect() as conn:
            packet = conn.execute(text("SELECT @@max_allowed_packet")).scalar_one()
        assert store.largest_value_bytes() == (packet - 64 * 1024) // 2
        c = db.create_corpus(store, "big")
        emb = clustered()
        ids = db.add_documents(store, c.id, [{"text": f"t{i}"} for i in range(len(emb))]).document_ids
        run = db.create_embedding_run(store, c.id, model_name="fake", layer=0, pooling="mean", n_heads=3,
                                      head_dim=8, dim=16)
        coords = np.zeros((len(ids), 2), np.float32)
        fits = db.save_projection(store, run.id, "standard", "pca", coords, ids,
                                  model_blob=b"x" * store.largest_value_bytes())
        assert len(db.load_projection(store, fits.id).model_blob) == store.largest_value_bytes()
        with pytest.raises(Exception):  # noqa: B017 - the driver's own error (packet too large / connection lost)
            db.save_projection(store, run.id, "head:0", "pca", coords, ids, model_blob=b"x" * (packet - 64 * 1024))
        assert [p.space for p in db.list_projections(store, run.id)] == ["standard"]


def test_foreign_blob_is_refused():
    with pytest.raises(ValueError):
        Reducer.loads(b"\x80\x04junk")


@pytest.mark.slow
def test_umap_seeded_and_places_queries(store_run):
    store, run, ids, emb = store_run
    a, red = fit_projection(emb.standard, "umap", seed=3, params={"n_neighbors": 5})
    b, _ = fit_projection(emb.standard, "umap", seed=3, params={"n_neighbors": 5})
    np.testing.assert_allclose(a, b, atol=1e-4)  # seeded: reproducible
    d = np.linalg.norm(a[:, None] - a[None], axis=2)
    np.fill_diagonal(d, np.inf)
    assert np.mean(d.argmin(axis=1) // 10 == np.arange(30) // 10) > 0.9
    q = red.transform(emb.standard[:1])
    assert q.shape == (1, 2) and np.isfinite(q).all()
    maps = ensure_maps(store, run.id, "umap", spaces=["standard"], seed=3)
    restored = Reducer.loads(db.find_projection(store, run.id, "standard", "umap").model_blob)
    assert restored.transform(emb.standard[:2]).shape == (2, 2)
    assert maps["standard"].coords.shape == (30, 2)
    # three documents: UMAP's spectral start cannot embed them (scipy refuses k >= N); a random start can
    small, red3 = fit_projection(emb.standard[:3], "umap", seed=3)
    assert small.shape == (3, 2) and np.isfinite(small).all() and red3.transform(emb.standard[3:4]).shape == (1, 2)


def test_small_maps_use_umaps_random_start_and_fewer_than_three_documents_are_refused():
    assert default_params("umap", 3) == {"n_neighbors": 2, "min_dist": 0.1, "init": "random"}
    assert default_params("umap", 4) == {"n_neighbors": 3, "min_dist": 0.1}  # spectral start, UMAP's default
    assert default_params("umap", 500)["n_neighbors"] == 15
    with pytest.raises(ValueError, match="at least three documents; this index has 2"):
        fit_projection(clustered().standard[:2], "pca")
