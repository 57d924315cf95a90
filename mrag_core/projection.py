"""2-D maps of embedding spaces (standard and each head) with PCA or UMAP: the fitting, the stored arrays, placing.

Vectors are L2-normalised first (retrieval ranks by cosine, so the map shows cosine geometry),
then reduced to 2-D. The fitted :class:`Reducer` places new points (a query) with ``transform``.
Each (run, space, method, params, seed) is computed once and stored (:mod:`services.maps`, with
``db.save_projection``): coordinates, document ids and the reducer in ``model_blob``. UMAP is imported lazily (its first
import JIT-compiles for ~30 s).

A stored reducer is plain arrays, never a pickle, so a database row cannot run code in the app
(:meth:`Reducer.dumps`: a tag line, then an uncompressed ``.npz`` read with ``allow_pickle=False``):

* PCA: the mean [d] and the two components [2, d]; ``transform(x) = (x - mean) @ components.T``, exactly as fitted.
* UMAP: the normalised training vectors [n, d] (float32), their 2-D coordinates [n, 2] and ``n_neighbors``. A
  query is placed the way umap-learn's own ``UMAP.transform`` starts (:func:`neighbour_weights`,
  :meth:`NeighbourReducer.transform`): its ``n_neighbors`` nearest training vectors (exact Euclidean distance
  between normalised vectors), weighted by UMAP's fuzzy membership ``exp(-d_j / sigma)`` (``sigma`` chosen so the
  weights of all but the nearest sum to ``log2(n_neighbors)``), and set at the weighted mean of their
  coordinates, or on a training point it equals. umap-learn then moves the point by a few epochs of its
  stochastic layout optimisation against the fixed map; that step is left out here, so a query's place is a
  deterministic function of the stored arrays (the same before and after a restart, in any process).

Reducers that older versions stored as pickles (``mrag-studio-reducer-v1:``) are never unpickled: their maps are
drawn, but place no query until refitted (:class:`SpaceMap` ``missing_model == "refit"``,
:func:`services.maps.forget_maps_without_model`).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from mrag_core.extraction import Embeddings

METHODS = ("pca", "umap")
FORMAT_TAG = b"mrag-studio-reducer-npz-v2\n"
"""How a stored reducer starts: the tag line, then an uncompressed ``.npz`` of its arrays."""
PICKLE_TAG = b"mrag-studio-reducer-v1:"
"""How reducers pickled by older versions start: such a blob is never unpickled (:class:`RefitNeeded`)."""


class ModelFormatError(ValueError):
    """A stored ``model_blob`` is not a reducer this version can read (it is never executed, whatever it holds)."""


class RefitNeeded(ModelFormatError):
    """A reducer an older version stored as a pickle: never unpickled (it could run code); refit the map."""


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


def neighbour_weights(distances: np.ndarray, n_neighbors: int) -> np.ndarray:
    """UMAP's membership strengths of a new point's ``distances`` [k] to its nearest training points (ascending),
    as umap-learn's ``transform`` computes them (``smooth_knn_dist`` with ``local_connectivity`` 1 - 1 = 0, so
    ``rho = 0``, then ``compute_membership_strengths``): ``w_j = exp(-d_j / sigma)``, 1 where ``d_j == 0``, with
    ``sigma`` found by 64 steps of bisection so that the weights of all neighbours but the nearest sum to
    ``log2(n_neighbors)`` (within 1e-5), and at least 1e-3 times the mean distance."""
    d = np.asarray(distances, dtype=np.float64)
    target = np.log2(n_neighbors)
    lo, hi, mid = 0.0, np.inf, 1.0
    rest = d[1:]
    for _ in range(64):
        psum = float(np.where(rest > 0, np.exp(-rest / mid), 1.0).sum())
        if abs(psum - target) < 1e-5:
            break
        if psum > target:
            hi = mid
            mid = (lo + hi) / 2.0
        else:
            lo = mid
            mid = mid * 2 if hi == np.inf else (lo + hi) / 2.0
    sigma = max(mid, 1e-3 * float(d.mean())) if d.size else mid
    return np.where(d > 0, np.exp(-d / sigma), 1.0) if sigma > 0 else np.ones_like(d)


class Reducer:
    """A fitted 2-D reducer over normalised vectors, made of arrays only: :class:`PCAReducer` or
    :class:`NeighbourReducer` (UMAP). ``transform`` places vectors; ``dumps`` / ``loads`` store it."""

    method: str

    def arrays(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _place(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        """2-D positions [m, 2] (float32) of ``vectors`` [m, d] (normalised first, as the map's were)."""
        return np.asarray(self._place(normalize(np.atleast_2d(vectors))), dtype=np.float32)

    def dumps(self) -> bytes:
        """:data:`FORMAT_TAG` + an uncompressed ``.npz`` of the method and the arrays."""
        buf = io.BytesIO()
        np.savez(buf, method=np.array(self.method), **self.arrays())
        return FORMAT_TAG + buf.getvalue()

    @staticmethod
    def loads(blob: bytes) -> "Reducer":
        """The reducer stored in ``blob`` (:meth:`dumps`), checked; nothing in it is ever executed. Raises
        :class:`RefitNeeded` for a pickle an older version stored, :class:`ModelFormatError` for anything else
        that is not a well-formed reducer."""
        blob = bytes(blob)
        if blob.startswith(PICKLE_TAG):
            raise RefitNeeded("this map's model was stored by an older MRAG Studio as a Python pickle, which is "
                              "never loaded (a pickle can run code); refit the map to place queries on it")
        if not blob.startswith(FORMAT_TAG):
            raise ModelFormatError("not a reducer stored by MRAG Studio")
        try:
            arrays = _read_npz(blob[len(FORMAT_TAG):])
            method = str(arrays.pop("method"))
            reducer: Reducer = (PCAReducer.from_arrays(arrays) if method == "pca"
                                else NeighbourReducer.from_arrays(arrays) if method == "umap" else None)  # type: ignore
        except (ValueError, KeyError, TypeError, OSError, zipfile.BadZipFile, EOFError, MemoryError) as exc:
            raise ModelFormatError(f"a stored reducer that cannot be read ({exc})") from None
        if reducer is None:
            raise ModelFormatError(f"a stored reducer of unknown method {method!r}")
        return reducer


def _read_npz(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of an uncompressed ``.npz`` (as :meth:`Reducer.dumps` writes), read without pickle. Refused
    before anything is allocated: a compressed member (it could inflate far beyond the blob), an object array, or
    a header announcing more data than its member holds (a huge shape would allocate that much first)."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError("compressed members")
            with zf.open(info) as member:
                version = np.lib.format.read_magic(member)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, _, dtype = read_header(member)
                if dtype.hasobject or int(np.prod(shape, dtype=np.float64)) * dtype.itemsize > info.file_size:
                    raise ValueError(f"member {info.filename} is not a plain array of the size it holds")
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {name: np.asarray(npz[name]) for name in npz.files}


def _finite(a: np.ndarray, name: str, ndim: int, kind: str = "f") -> np.ndarray:
    if a.dtype.kind != kind or a.ndim != ndim or (kind == "f" and not np.isfinite(a).all()):
        raise ValueError(f"{name} is not a finite {ndim}-d array")
    return a


class PCAReducer(Reducer):
    """PCA: ``transform(x) = (x - mean) @ components.T`` (``mean`` [d], ``components`` [2, d], float64)."""

    method = "pca"

    def __init__(self, mean: np.ndarray, components: np.ndarray, explained_variance_ratio: np.ndarray) -> None:
        self.mean = np.asarray(mean, dtype=np.float64)
        self.components = np.asarray(components, dtype=np.float64)
        self.explained_variance_ratio = np.asarray(explained_variance_ratio, dtype=np.float64)

    @classmethod
    def from_fit(cls, model: PCA2) -> "PCAReducer":
        return cls(model.mean_, model.components_, model.explained_variance_ratio_)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "PCAReducer":
        mean = _finite(arrays["mean"], "mean", 1)
        components = _finite(arrays["components"], "components", 2)
        if components.shape != (2, mean.shape[0]):
            raise ValueError(f"components of shape {components.shape} for a mean of {mean.shape[0]} values")
        return cls(mean, components, _finite(arrays["explained_variance_ratio"], "explained_variance_ratio", 1))

    def arrays(self) -> dict[str, np.ndarray]:
        return {"mean": self.mean, "components": self.components,
                "explained_variance_ratio": self.explained_variance_ratio}

    def _place(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mean) @ self.components.T


class NeighbourReducer(Reducer):
    """UMAP: places a vector from its ``n_neighbors`` nearest ``train`` vectors [n, d] (normalised, float32) and
    their map coordinates ``embedding`` [n, 2], as umap-learn's transform starts (see the module docstring)."""

    method = "umap"

    def __init__(self, train: np.ndarray, embedding: np.ndarray, n_neighbors: int) -> None:
        self.train = np.ascontiguousarray(train, dtype=np.float32)
        self.embedding = np.ascontiguousarray(embedding, dtype=np.float32)
        self.n_neighbors = int(n_neighbors)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "NeighbourReducer":
        train = _finite(arrays["train"], "train", 2)
        embedding = _finite(arrays["embedding"], "embedding", 2)
        k = int(_finite(arrays["n_neighbors"], "n_neighbors", 0, "i"))
        if embedding.shape != (train.shape[0], 2) or not 1 <= k or train.shape[0] < 1:
            raise ValueError(f"{train.shape[0]} training vectors, coordinates of shape {embedding.shape}, "
                             f"n_neighbors {k}")
        return cls(train, embedding, k)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"train": self.train, "embedding": self.embedding, "n_neighbors": np.array(self.n_neighbors)}

    def _place(self, x: np.ndarray) -> np.ndarray:
        train = self.train.astype(np.float64)
        x = x.astype(np.float32).astype(np.float64)  # as the training vectors were stored: a document's own vector
        k = min(self.n_neighbors, train.shape[0])  # is at distance 0 from its training vector
        out = np.empty((x.shape[0], 2), dtype=np.float64)
        for i, xi in enumerate(x):
            dist = np.sqrt(((train - xi) ** 2).sum(axis=1))
            idx = np.argsort(dist, kind="stable")[:k]
            w = neighbour_weights(dist[idx], self.n_neighbors)
            ones = np.flatnonzero(w.astype(np.float32) == 1.0)
            if ones.size:  # as umap-learn's init_graph_transform: a point equal to a training point sits on it
                out[i] = self.embedding[idx[ones[0]]]
            else:
                out[i] = (w[:, None] * self.embedding[idx].astype(np.float64)).sum(axis=0) / w.sum()
        return out


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
    """2-D coordinates [n, 2] of ``vectors`` [n, d] and the fitted reducer (arrays only, as it is stored: the
    reducer places a query the same way now and after a restart)."""
    x = normalize(vectors)
    n = x.shape[0]
    if n < 3:
        raise ValueError(f"A map needs at least three documents; this index has {n}.")
    params = {**default_params(method, n), **(params or {})}
    if method == "pca":
        pca = PCA2().fit(x)
        return np.asarray(pca.transform(x), dtype=np.float32), PCAReducer.from_fit(pca)
    import umap  # lazy: the first import JIT-compiles

    model = umap.UMAP(n_components=2, random_state=seed, n_jobs=1, **params)
    coords = np.asarray(model.fit_transform(x), dtype=np.float32)
    return coords, NeighbourReducer(x, coords, int(getattr(model, "_n_neighbors", model.n_neighbors)))


def space_names(n_heads: int) -> list[str]:
    return ["standard", *(f"head:{h}" for h in range(n_heads))]


def space_vectors(emb: Embeddings, space: str) -> np.ndarray:
    """The [n, d] vectors of ``space`` (``standard`` or ``head:<i>``)."""
    if space == "standard":
        return emb.standard
    if space.startswith("head:"):
        return emb.heads[:, int(space.split(":", 1)[1]), :]
    raise ValueError(f"unknown space '{space}'")


MissingModel = Literal["too_large", "refit"]


@dataclass
class SpaceMap:
    """One space's map. ``reducer`` is None when the map places no query; ``missing_model`` says why:
    ``"too_large"`` (the model was larger than the database takes in one value, so it was stored without it) or
    ``"refit"`` (the stored model is an older version's pickle, never loaded, or unreadable: refit the map)."""

    space: str
    method: str
    doc_ids: list[int]
    coords: np.ndarray
    reducer: Reducer | None
    from_store: bool
    missing_model: MissingModel | None = None


def stored_reducer(blob: bytes | None) -> tuple[Reducer | None, MissingModel | None]:
    """The reducer of a stored ``model_blob`` and, when there is none to place queries with, why (None: stored
    without its model; an unreadable blob or an older version's pickle: refit)."""
    if blob is None:
        return None, "too_large"
    try:
        return Reducer.loads(blob), None
    except ModelFormatError:
        return None, "refit"


def place_query(maps: dict[str, SpaceMap], q: Embeddings) -> dict[str, tuple[float, float]]:
    """2-D position of the (first) query in every map that has a reducer."""
    out = {}
    for space, m in maps.items():
        if m.reducer is not None:
            xy = m.reducer.transform(space_vectors(q, space)[:1])[0]
            out[space] = (float(xy[0]), float(xy[1]))
    return out
