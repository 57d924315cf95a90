"""2-D maps of embedding spaces (standard and each head) with PCA or UMAP; stored per run.

Vectors are L2-normalised first (retrieval ranks by cosine, so the map shows cosine geometry),
then reduced to 2-D. The fitted :class:`Reducer` places new points (a query) with ``transform``.
Each (run, space, method, params, seed) is computed once and stored with ``db.save_projection``:
coordinates, document ids and the pickled reducer in ``model_blob`` (only blobs written by this
application are ever unpickled). UMAP is imported lazily (its first import JIT-compiles for ~30 s).
"""

from __future__ import annotations

import pickle
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

import db
from mrag_core.extraction import Embeddings

METHODS = ("pca", "umap")
PICKLE_TAG = b"mrag-studio-reducer-v1:"


def normalize(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n == 0, 1.0, n)


class PCA2:
    """Two principal components via SVD; component signs fixed (largest loading positive)."""

    def fit(self, x: np.ndarray) -> "PCA2":
        self.mean_ = x.mean(axis=0)
        _, s, vt = np.linalg.svd(x - self.mean_, full_matrices=False)
        comps = vt[:2]
        if comps.shape[0] < 2:  # fewer than two distinct directions: pad with zeros
            comps = np.vstack([comps, np.zeros((2 - comps.shape[0], x.shape[1]))])
        signs = np.sign(comps[np.arange(2), np.abs(comps).argmax(axis=1)])
        self.components_ = comps * np.where(signs == 0, 1.0, signs)[:, None]
        total = float((s ** 2).sum())
        self.explained_variance_ratio_ = (s[:2] ** 2) / total if total > 0 else np.zeros(2)
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mean_) @ self.components_.T


@dataclass
class Reducer:
    """A fitted 2-D reducer over normalised vectors (``model`` is PCA2 or umap.UMAP)."""

    method: str
    model: Any

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        x = normalize(np.atleast_2d(vectors))
        return np.asarray(self.model.transform(x), dtype=np.float32)

    def dumps(self) -> bytes:
        return PICKLE_TAG + pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def loads(blob: bytes) -> "Reducer":
        if not blob.startswith(PICKLE_TAG):
            raise ValueError("not a reducer written by MRAG Studio")
        obj = pickle.loads(blob[len(PICKLE_TAG):])  # noqa: S301 - our own blob, tagged above
        if not isinstance(obj, Reducer):
            raise ValueError("not a reducer written by MRAG Studio")
        return obj


def default_params(method: str, n: int) -> dict[str, Any]:
    if method == "pca":
        return {}
    if method == "umap":
        params: dict[str, Any] = {"n_neighbors": int(max(2, min(15, n - 1))), "min_dist": 0.1}
        if n < 4:  # UMAP's spectral start needs more points than n_components + 1 (scipy's eigh refuses k >= N)
            params["init"] = "random"
        return params
    raise ValueError(f"unknown projection method '{method}': use one of {', '.join(METHODS)}")


def fit_projection(vectors: np.ndarray, method: str = "pca", *, seed: int = 0,
                   params: dict[str, Any] | None = None) -> tuple[np.ndarray, Reducer]:
    """2-D coordinates [n, 2] of ``vectors`` [n, d] and the fitted reducer."""
    x = normalize(vectors)
    n = x.shape[0]
    if n < 3:
        raise ValueError(f"A map needs at least three documents; this index has {n}.")
    params = {**default_params(method, n), **(params or {})}
    if method == "pca":
        model: Any = PCA2().fit(x)
        coords = model.transform(x)
    else:
        import umap  # lazy: the first import JIT-compiles

        model = umap.UMAP(n_components=2, random_state=seed, n_jobs=1, **params)
        coords = model.fit_transform(x)
    return np.asarray(coords, dtype=np.float32), Reducer(method, model)


def space_names(n_heads: int) -> list[str]:
    return ["standard", *(f"head:{h}" for h in range(n_heads))]


def space_vectors(emb: Embeddings, space: str) -> np.ndarray:
    """The [n, d] vectors of ``space`` (``standard`` or ``head:<i>``)."""
    if space == "standard":
        return emb.standard
    if space.startswith("head:"):
        return emb.heads[:, int(space.split(":", 1)[1]), :]
    raise ValueError(f"unknown space '{space}'")


@dataclass
class SpaceMap:
    space: str
    method: str
    doc_ids: list[int]
    coords: np.ndarray
    reducer: Reducer | None
    from_store: bool


def load_or_fit(store: db.Store, run_id: int, space: str, method: str, *, emb: Embeddings | None = None,
                doc_ids: Sequence[int] | None = None, seed: int = 0) -> SpaceMap:
    """The stored projection of (run, space, method, seed) or a new one fitted and stored.
    ``emb``/``doc_ids`` (the run's vectors) are loaded when not given."""
    found = db.find_projection(store, run_id, space, method, seed=seed)
    if found is not None:
        reducer = Reducer.loads(found.model_blob) if found.model_blob else None
        return SpaceMap(space, method, found.doc_ids, found.coords, reducer, True)
    if emb is None or doc_ids is None:
        ids, std, heads = db.load_vectors(store, run_id)
        emb, doc_ids = Embeddings(std, heads), [int(i) for i in ids]
    params = default_params(method, len(doc_ids))
    coords, reducer = fit_projection(space_vectors(emb, space), method, seed=seed, params=params)
    blob: bytes | None = reducer.dumps()
    if len(blob) > store.largest_value_bytes():  # e.g. a UMAP model of 10,000 384-d vectors (38 MB) on MariaDB
        # Stored without its model, the map places no query: not now either, so it acts the same after a restart.
        blob, kept = None, None
    else:
        kept = reducer
    db.save_projection(store, run_id, space, method, coords, list(doc_ids), params=params, seed=seed,
                       model_blob=blob)
    return SpaceMap(space, method, [int(d) for d in doc_ids], coords, kept, False)


def forget_maps_without_model(store: db.Store, run_id: int, method: str, *, seed: int = 0,
                              spaces: Sequence[str] | None = None) -> list[str]:
    """Delete the stored maps of (run, method, seed) that were stored without their fitted model (it was larger
    than the database takes in one value), all or those of ``spaces``, so that :func:`ensure_maps` fits them again,
    e.g. after MySQL's ``max_allowed_packet`` was raised. Returns the spaces whose maps were deleted."""
    wanted = set(spaces) if spaces is not None else None
    gone: list[str] = []
    for p in db.list_projections(store, run_id):
        if (p.method == method and p.seed == seed and not p.has_model
                and (wanted is None or p.space in wanted)):
            db.delete_projection(store, p.id)
            gone.append(p.space)
    return gone


def ensure_maps(store: db.Store, run_id: int, method: str = "pca", *, spaces: Sequence[str] | None = None,
                seed: int = 0, progress: Callable[[int, int], None] | None = None,
                cancel: threading.Event | None = None) -> dict[str, SpaceMap]:
    """Maps of all (or the given) spaces of a run, computing only those not stored yet.
    ``progress(done, total)`` after each space; ``cancel`` stops between spaces (stored ones stay)."""
    run = db.get_embedding_run(store, run_id)
    names = list(spaces) if spaces is not None else space_names(run.n_heads)
    emb: Embeddings | None = None
    ids: list[int] | None = None
    out: dict[str, SpaceMap] = {}
    for i, space in enumerate(names):
        if cancel is not None and cancel.is_set():
            break
        if emb is None and db.find_projection(store, run_id, space, method, seed=seed) is None:
            raw_ids, std, heads = db.load_vectors(store, run_id)
            emb, ids = Embeddings(std, heads), [int(x) for x in raw_ids]
        out[space] = load_or_fit(store, run_id, space, method, emb=emb, doc_ids=ids, seed=seed)
        if progress is not None:
            progress(i + 1, len(names))
    return out


def place_query(maps: dict[str, SpaceMap], q: Embeddings) -> dict[str, tuple[float, float]]:
    """2-D position of the (first) query in every map that has a reducer."""
    out = {}
    for space, m in maps.items():
        if m.reducer is not None:
            xy = m.reducer.transform(space_vectors(q, space)[:1])[0]
            out[space] = (float(xy[0]), float(xy[1]))
    return out
