"""Search backends behind one small interface: top-``c`` neighbours in each of ``s`` spaces.

Vectors are ``[n, s, d]``: ``s = 1`` for the standard space, ``s = h`` for the head spaces or the
split pieces. Scores are similarities: cosine (vectors L2-normalised per space) or inner product.
Backends:

* ``torch``: exact; one batched matmul over all spaces at once, ``scores[s, q, n] = Q[s] @ X[s].T``,
  then the top ``c`` of every row (``torch.topk`` on the GPU; on the CPU the compiled one-pass
  heap of :func:`mrag_core.kernels.top_c_rows`).
* ``faiss-flat``: exact, one ``IndexFlatIP`` per space (CPU).
* ``faiss-hnsw``: approximate, one ``IndexHNSWFlat`` per space (CPU), ``efSearch = max(64, 2c)``;
  ``M`` (links per node) 16 for spaces of at most 64 dimensions (head spaces), 32 above: a
  low-dimensional space reaches the same recall with fewer links, and each link is a distance
  computation on every visit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from mrag_core.device import pick_device
from mrag_core.kernels import top_c_rows

BACKENDS = ("torch", "faiss-flat", "faiss-hnsw")
METRICS = ("cosine", "ip")


@dataclass(frozen=True)
class Hits:
    """Neighbours per query and space: ``ids`` [q, s, c] (int64) and ``scores`` [q, s, c] (similarity, best first)."""

    ids: np.ndarray
    scores: np.ndarray


class SpaceIndex(Protocol):
    """Nearest-neighbour search in ``n_spaces`` spaces at once."""

    n_docs: int
    n_spaces: int
    metric: str

    def search(self, queries: np.ndarray, depth: int) -> Hits:
        """Top-``depth`` documents per query [q, s, d] and space."""
        ...


def normalize_spaces(x: np.ndarray) -> np.ndarray:
    """L2-normalise every ``[..., d]`` vector (zero vectors stay zero)."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def _prepare(vectors: np.ndarray, metric: str) -> np.ndarray:
    if metric not in METRICS:
        raise ValueError(f"unknown metric '{metric}': use one of {', '.join(METRICS)}")
    if vectors.ndim == 2:
        vectors = vectors[:, None, :]
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if not np.isfinite(vectors).all():
        raise ValueError("the vectors contain NaN or infinite values (a broken embedding?); nothing was searched")
    return normalize_spaces(vectors) if metric == "cosine" else vectors


class TorchIndex:
    """Exact search with one batched matmul over all spaces (CUDA when available)."""

    def __init__(self, vectors: np.ndarray, metric: str = "cosine", device: str = "auto") -> None:
        x = _prepare(vectors, metric)
        self.n_docs, self.n_spaces, self.dim = x.shape
        self.metric = metric
        self.device = pick_device(device)
        # [s, d, n]: each space's documents as columns, so scores = Q[s] @ Xt[s].
        self._xt = torch.from_numpy(np.ascontiguousarray(x.transpose(1, 2, 0))).to(self.device)

    def search(self, queries: np.ndarray, depth: int) -> Hits:
        q = _prepare(queries, self.metric)
        depth = min(depth, self.n_docs)
        qt = torch.from_numpy(np.ascontiguousarray(q.transpose(1, 0, 2))).to(self.device)  # [s, q, d]
        with torch.inference_mode():
            scores = torch.bmm(qt, self._xt)  # [s, q, n]
            if self.device.type == "cpu" and scores.dtype == torch.float32:
                # one compiled heap pass per row beats torch.topk over s x q rows (see kernels)
                s_count, nq, n = scores.shape
                ids, vals = top_c_rows(scores.numpy().reshape(s_count * nq, n), depth)
                return Hits(ids=np.ascontiguousarray(ids.reshape(s_count, nq, depth).transpose(1, 0, 2)),
                            scores=np.ascontiguousarray(vals.reshape(s_count, nq, depth).transpose(1, 0, 2)))
            top = torch.topk(scores, depth, dim=2, largest=True, sorted=True)
        return Hits(
            ids=top.indices.permute(1, 0, 2).cpu().numpy().astype(np.int64),
            scores=top.values.permute(1, 0, 2).float().cpu().numpy(),
        )


class FaissIndex:
    """One FAISS index per space (``flat``: exact inner product; ``hnsw``: approximate)."""

    def __init__(self, vectors: np.ndarray, metric: str = "cosine", kind: str = "flat", hnsw_m: int | None = None,
                 ef_construction: int = 80) -> None:
        import faiss

        x = _prepare(vectors, metric)
        self.n_docs, self.n_spaces, self.dim = x.shape
        self.metric = metric
        self.kind = kind
        self._swig_ptr = faiss.swig_ptr
        self._indexes = []
        self.ef_search: int | None = None  # HNSW: None -> max(64, 2 * depth) per search
        self.hnsw_m = hnsw_m if hnsw_m is not None else (16 if self.dim <= 64 else 32)
        for s in range(self.n_spaces):
            if kind == "flat":
                index = faiss.IndexFlatIP(self.dim)
            elif kind == "hnsw":
                index = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
                index.hnsw.efConstruction = ef_construction
            else:
                raise ValueError(f"unknown FAISS index kind '{kind}'")
            index.add(np.ascontiguousarray(x[:, s, :]))
            self._indexes.append(index)

    def search(self, queries: np.ndarray, depth: int) -> Hits:
        q = _prepare(queries, self.metric)
        depth = min(depth, self.n_docs)
        nq = q.shape[0]
        per_space = np.ascontiguousarray(q.transpose(1, 0, 2))  # [s, q, d]: each space's queries contiguous
        ids = np.empty((self.n_spaces, nq, depth), np.int64)
        scores = np.empty((self.n_spaces, nq, depth), np.float32)
        if self.kind == "hnsw":
            ef = self.ef_search if self.ef_search is not None else max(64, 2 * depth)
            for index in self._indexes:
                if index.hnsw.efSearch != ef:
                    index.hnsw.efSearch = ef
        # the SWIG entry point with preallocated outputs: the Python wrapper's checks and
        # allocations cost about as much as a small head space's search, once per space
        ptr = self._swig_ptr
        for s, index in enumerate(self._indexes):
            index.search_c(nq, ptr(per_space[s]), depth, ptr(scores[s]), ptr(ids[s]))
        return Hits(ids=np.ascontiguousarray(ids.transpose(1, 0, 2)), scores=np.ascontiguousarray(scores.transpose(1, 0, 2)))


def build_index(vectors: np.ndarray, backend: str = "torch", metric: str = "cosine", device: str = "auto") -> SpaceIndex:
    """Build a :class:`SpaceIndex` over ``vectors`` [n, s, d] (or [n, d] for one space)."""
    if backend == "torch":
        return TorchIndex(vectors, metric=metric, device=device)
    if backend == "faiss-flat":
        return FaissIndex(vectors, metric=metric, kind="flat")
    if backend == "faiss-hnsw":
        return FaissIndex(vectors, metric=metric, kind="hnsw")
    raise ValueError(f"unknown search backend '{backend}': use one of {', '.join(BACKENDS)}")

