"""Projections: PCA maps computed once per run and space, stored with their reducer (arrays, never a pickle),
queries placed by the fitted transform the same before and after the round trip through the database; a pickle
planted in the database never runs; UMAP's placement of a query checked by hand and against umap-learn's own
(slow: numba JIT)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import db
from mrag_core.extraction import Embeddings
from mrag_core.projection import (
    PCA2,
    PICKLE_TAG,
    ModelFormatError,
    NeighbourReducer,
    Reducer,
    RefitNeeded,
    default_params,
    fit_projection,
    neighbour_weights,
    place_query,
    space_vectors,
)
from services.maps import ensure_maps, forget_maps_without_model


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
    ev = red.explained_variance_ratio
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
    with pytest.raises(ModelFormatError):
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


class _Evil:
    """Unpickling this creates the file ``marker`` (builtins.open): what a hostile row in a shared database
    could do with any callable."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_planted_in_the_database_never_runs(store_run, tmp_path: Path):
    """Before, a blob tagged as ours was unpickled when the map was loaded: the planted pickle ran. Now it is
    never loaded: the map is drawn, places no query, and is marked for a refit, which replaces it."""
    import pickle

    store, run, ids, emb = store_run
    marker = tmp_path / "pwned"
    coords = np.zeros((len(ids), 2), np.float32)
    db.save_projection(store, run.id, "standard", "pca", coords, ids, seed=0,
                       model_blob=PICKLE_TAG + pickle.dumps(_Evil(str(marker))))
    db.save_projection(store, run.id, "head:0", "pca", coords, ids, seed=0,
                       model_blob=pickle.dumps(_Evil(str(marker))))  # untagged: refused as foreign
    maps = ensure_maps(store, run.id, "pca", spaces=["standard", "head:0"])
    assert not marker.exists()
    for space in ("standard", "head:0"):
        m = maps[space]
        assert m.from_store and m.reducer is None and m.missing_model == "refit"
        np.testing.assert_array_equal(m.coords, coords)
    assert place_query(maps, Embeddings(emb.standard[:1], emb.heads[:1])) == {}
    with pytest.raises(RefitNeeded, match="never loaded"):
        Reducer.loads(db.find_projection(store, run.id, "standard", "pca").model_blob)
    assert sorted(forget_maps_without_model(store, run.id, "pca")) == ["head:0", "standard"]
    again = ensure_maps(store, run.id, "pca", spaces=["standard", "head:0"])
    assert all(not m.from_store and m.reducer is not None for m in again.values())
    assert not marker.exists()


def test_an_npz_with_an_object_array_compressed_members_or_a_false_size_is_refused(tmp_path: Path):
    """Object arrays in an .npz are pickles too: refused (np.load(allow_pickle=False) would too). So are members
    that could make a small blob take much memory: compressed ones, and a header announcing more than it holds."""
    import io
    import zipfile

    from mrag_core.projection import FORMAT_TAG

    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    np.savez(buf, method=np.array("pca"), mean=np.array([_Evil(str(marker))], dtype=object),
             components=np.zeros((2, 1)), explained_variance_ratio=np.zeros(2))
    with pytest.raises(ModelFormatError, match="cannot be read"):
        Reducer.loads(FORMAT_TAG + buf.getvalue())
    assert not marker.exists()
    good = fit_projection(clustered().standard, "pca")[1]
    arrays = {"method": np.array("pca"), **good.arrays()}
    squeezed = io.BytesIO()
    np.savez_compressed(squeezed, **arrays)
    with pytest.raises(ModelFormatError, match="compressed"):
        Reducer.loads(FORMAT_TAG + squeezed.getvalue())
    bad = io.BytesIO()
    np.savez(bad, **{**arrays, "components": np.zeros((3, 16))})
    with pytest.raises(ModelFormatError, match="components of shape"):
        Reducer.loads(FORMAT_TAG + bad.getvalue())
    # a header announcing 10^12 float64 values for a member of a few bytes: refused before any allocation
    buf2 = io.BytesIO()
    with zipfile.ZipFile(buf2, "w", zipfile.ZIP_STORED) as zf:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                      "shape": (10 ** 12,)})
        zf.writestr("mean.npy", header.getvalue() + b"\0" * 16)
    with pytest.raises(ModelFormatError, match="not a plain array of the size it holds"):
        Reducer.loads(FORMAT_TAG + buf2.getvalue())


def test_a_stored_pca_map_places_a_query_where_the_fitted_one_did(store_run):
    """The reducer read back from the database places a new query at exactly the coordinates the freshly fitted
    one gave, in every space."""
    store, run, ids, emb = store_run
    fresh = ensure_maps(store, run.id, "pca")
    assert all(not m.from_store and m.reducer is not None for m in fresh.values())
    rng = np.random.default_rng(7)
    q = Embeddings(rng.normal(size=(1, 16)).astype(np.float32), rng.normal(size=(1, 3, 8)).astype(np.float32))
    before = place_query(fresh, q)
    stored = ensure_maps(store, run.id, "pca")
    assert all(m.from_store for m in stored.values())
    assert place_query(stored, q) == before and len(before) == 4
    red = fresh["standard"].reducer
    again = Reducer.loads(red.dumps())
    np.testing.assert_array_equal(again.mean, red.mean)
    np.testing.assert_array_equal(again.components, red.components)


def test_umap_neighbour_weights_by_hand():
    """Distances 0.5, 1, 2 and three neighbours: sigma makes exp(-1/s) + exp(-2/s) = log2(3) (the nearest is
    left out of the sum), i.e. u + u^2 = log2(3) with u = exp(-1/s): u = (sqrt(1 + 4 log2 3) - 1) / 2."""
    u = (np.sqrt(1 + 4 * np.log2(3)) - 1) / 2
    s = -1 / np.log(u)
    w = neighbour_weights(np.array([0.5, 1.0, 2.0]), 3)
    np.testing.assert_allclose(w, [np.exp(-0.5 / s), u, u * u], rtol=1e-5)
    assert abs(u - 0.85461) < 1e-5
    np.testing.assert_array_equal(neighbour_weights(np.array([0.0, 1.0, 2.0]), 3)[0], 1.0)  # a duplicate: weight 1


def test_umap_reducer_places_a_query_at_the_weighted_mean_of_its_neighbours():
    """Training points on the unit circle at chord distances 0.25, 0.5 and 1 from the query [1, 0] (angles
    2 asin(d / 2)), and one at distance 2 that is not among the 3 neighbours. With u = exp(-0.5 / s),
    u + u^2 = log2(3) as above and the nearest weighs exp(-0.25 / s) = sqrt(u): the query lands at the mean of
    the three points' coordinates with those weights; a training vector lands on its own point; and the round
    trip through dumps / loads changes nothing."""
    angles = 2 * np.arcsin(np.array([0.25, 0.5, 1.0, 2.0]) / 2) * np.array([1, -1, 1, 1])
    train = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    embedding = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [50.0, 50.0]], np.float32)
    red = NeighbourReducer(train, embedding, 3)
    u = (np.sqrt(1 + 4 * np.log2(3)) - 1) / 2
    w = np.array([np.sqrt(u), u, u * u])
    expected = (w[:, None] * embedding[:3]).sum(axis=0) / w.sum()
    placed = red.transform(np.array([[3.0, 0.0]]))  # normalised first
    np.testing.assert_allclose(placed[0], expected, rtol=1e-5)
    np.testing.assert_array_equal(red.transform(train[1:2] * 4), embedding[1:2])
    back = Reducer.loads(red.dumps())
    assert isinstance(back, NeighbourReducer) and back.n_neighbors == 3
    np.testing.assert_array_equal(back.transform(np.array([[3.0, 0.0]])), placed)


@pytest.mark.slow
def test_umap_placement_is_umap_learns_own_transform_start_and_survives_the_database(store_run):
    """umap-learn's transform (0.5: exact distances on small data, smooth_knn_dist, membership strengths,
    init_graph_transform) before its refining epochs gives the same place as NeighbourReducer, query by query; and
    the stored map places queries where the fitted one did."""
    import scipy.sparse  # noqa: F401 - umap's graph
    import umap
    from umap.umap_ import init_graph_transform

    from mrag_core.projection import normalize

    store, run, ids, emb = store_run
    x = normalize(emb.standard)
    model = umap.UMAP(n_components=2, random_state=3, n_jobs=1, n_neighbors=5, min_dist=0.1).fit(x)
    red = NeighbourReducer(x, model.embedding_, model._n_neighbors)
    model.transform_mode = "graph"
    rng = np.random.default_rng(11)
    queries = normalize(emb.standard[rng.integers(0, 30, 8)] + rng.normal(scale=0.8, size=(8, 16)))
    for q in queries:
        graph = model.transform(q[None, :].astype(np.float32)).tocsr()
        graph.eliminate_zeros()
        theirs = init_graph_transform(graph, model.embedding_)[0]
        np.testing.assert_allclose(red.transform(q[None, :])[0], theirs, atol=1e-4)
    fresh = ensure_maps(store, run.id, "umap", spaces=["standard", "head:1"], seed=3)
    probe = Embeddings(queries[:1].astype(np.float32), rng.normal(size=(1, 3, 8)).astype(np.float32))
    before = place_query(fresh, probe)
    stored = ensure_maps(store, run.id, "umap", spaces=["standard", "head:1"], seed=3)
    assert all(m.from_store for m in stored.values()) and place_query(stored, probe) == before
    own = place_query(stored, Embeddings(emb.standard[4:5], emb.heads[4:5]))
    for space, m in stored.items():
        np.testing.assert_array_equal(own[space], m.coords[4])  # a document's own vector sits on its point
