"""Search backends behind one small interface: top-``c`` neighbours in each of ``s`` spaces.

Vectors are ``[n, s, d]``: ``s = 1`` for the standard space, ``s = h`` for the head spaces or the
split pieces. Scores are similarities: cosine (vectors L2-normalised per space) or inner product.
Backends:

* ``torch``: exact; one batched matmul over all spaces at once, ``scores[s, q, n] = Q[s] @ X[s].T``,
  then the top ``c`` of every row (on the GPU one ``torch.topk`` over a score-and-id key,
  :func:`topk_ties_by_id`; on the CPU the compiled selection of :func:`mrag_core.kernels.top_c_rows`;
  both order equal scores by the smaller id).
* ``faiss-flat``: exact (CPU): one space (Standard) is a FAISS ``IndexFlatIP``; several spaces (heads, split
  pieces) are scanned together by :class:`mrag_core.flat_scan.FlatScan`, one compiled pass over the
  numbers per query, since FAISS searching each 32-d space on its own costs 1.4-1.75x one search of the
  concatenated vector (per-document call and heap overheads; ``bench/engine.py`` prints both).
* ``milvus`` / ``milvus-hnsw``: the vectors in a Milvus collection (Milvus Lite or a server), FLAT (exact, ties by
  id) or HNSW (calibrated as ``faiss-hnsw``): see :mod:`mrag_core.milvus_backend`.
* ``faiss-hnsw``: approximate, one ``IndexHNSWFlat`` per space (CPU). ``efSearch`` is chosen per
  space when the index is built, the smallest that reaches ``target_recall`` (default 0.9)
  recall@32 against exact search (:mod:`mrag_core.hnsw_tuning`), so every space, standard or head,
  answers at the same accuracy; ``target_recall=None`` keeps a fixed ``efSearch = max(64, 2c)``.
  Views voted into one list are also calibrated per vote (``votes``: the final list's recall, see
  ``hnsw_tuning.calibrate_votes``), and a search for that vote (``search(..., vote=name)``) uses it.
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
from mrag_core.flat_scan import FlatScan
from mrag_core.hnsw_tuning import Calibration, VoteFn, calibrate, calibrate_votes, calibration_sets, check_target
from mrag_core.kernels import top_c_rows
from mrag_core.settings import BACKENDS  # written once, there

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

    def search(self, queries: np.ndarray, depth: int, vote: str | None = None) -> Hits:
        """Top-``depth`` documents per query [q, s, d] and space; ``vote`` names the vote the hits are
        for (approximate backends may search to that vote's calibrated accuracy; exact ones ignore it)."""
        ...

    def search_key(self, vote: str | None) -> str | None:
        """Equal keys for two votes mean equal hits, so one search can serve both."""
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


def topk_ties_by_id(scores: torch.Tensor, depth: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, values)``: the ``depth`` largest of every row of ``scores`` [..., n] (float), best first,
    equal scores ordered by the smaller id, as the CPU kernel orders them (a bare ``torch.topk``
    on CUDA leaves ties in any order and may cut a run of ties anywhere).

    First one ``torch.topk`` of ``depth + 1``: if no two neighbours in it are equal, no tie can
    change the order or the cut, and its first ``depth`` are the answer (the usual case with float
    scores). Otherwise one ``topk`` over a unique int64 key, ``key = ord(score) * 2^32 + (2^32 - 1 -
    id)``, where ``ord`` maps a float32 to an int32 of the same order (its bits, with the magnitude
    bits of negative values flipped; ``+ 0.0`` first turns -0.0 into +0.0, which compares equal to
    it), and the values gathered back. Ids below 2^32."""
    s = scores.float()
    n = s.shape[-1]
    top = torch.topk(s, min(depth + 1, n), dim=-1, largest=True, sorted=True)
    if not bool((top.values[..., 1:] == top.values[..., :-1]).any()):
        return top.indices[..., :depth], top.values[..., :depth]
    s = s + 0.0
    bits = s.view(torch.int32)
    ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    low = (2**32 - 1) - torch.arange(n, device=s.device, dtype=torch.int64)
    key = ordered.to(torch.int64) * 2**32 + low
    ids = torch.topk(key, depth, dim=-1, largest=True, sorted=True).indices
    return ids, torch.gather(s, -1, ids)


class TorchIndex:
    """Exact search with one batched matmul over all spaces (CUDA when available)."""

    def __init__(self, vectors: np.ndarray, metric: str = "cosine", device: str = "auto") -> None:
        x = _prepare(vectors, metric)
        self.n_docs, self.n_spaces, self.dim = x.shape
        self.metric = metric
        self.device = pick_device(device)
        # [s, d, n]: each space's documents as columns, so scores = Q[s] @ Xt[s].
        self._xt = torch.from_numpy(np.ascontiguousarray(x.transpose(1, 2, 0))).to(self.device)

    def search_key(self, vote: str | None) -> None:
        """Exact search: the same hits for every vote."""
        return None

    def search(self, queries: np.ndarray, depth: int, vote: str | None = None) -> Hits:
        q = _prepare(queries, self.metric)
        depth = min(depth, self.n_docs)
        qt = torch.from_numpy(np.ascontiguousarray(q.transpose(1, 0, 2))).to(self.device)  # [s, q, d]
        with torch.inference_mode():
            scores = torch.bmm(qt, self._xt)  # [s, q, n]
            if self.device.type == "cpu" and scores.dtype == torch.float32:
                # the compiled selection per row beats torch.topk over s x q rows (see kernels)
                s_count, nq, n = scores.shape
                ids, vals = top_c_rows(scores.numpy().reshape(s_count * nq, n), depth)
                return Hits(ids=np.ascontiguousarray(ids.reshape(s_count, nq, depth).transpose(1, 0, 2)),
                            scores=np.ascontiguousarray(vals.reshape(s_count, nq, depth).transpose(1, 0, 2)))
            ids, vals = topk_ties_by_id(scores, depth)
        return Hits(
            ids=ids.permute(1, 0, 2).cpu().numpy().astype(np.int64),
            scores=vals.permute(1, 0, 2).float().cpu().numpy(),
        )


class FaissIndex:
    """One FAISS index per space (``flat``: exact inner product; ``hnsw``: approximate); ``flat`` with more than
    one space: a :class:`~mrag_core.flat_scan.FlatScan` over all of them instead (``scan``), unless ``one_pass`` is
    false (what ``bench/engine.py`` compares the scan with).

    HNSW ``efSearch`` per space: ``ef_search`` when set (one value for all spaces), else for a search
    ``vote`` calibrated in ``votes`` that vote's :func:`~mrag_core.hnsw_tuning.calibrate_votes` value,
    else the build-time per-space :class:`~mrag_core.hnsw_tuning.Calibration` for ``target_recall``,
    else ``max(64, 2c)``. ``votes`` maps a vote's name to the function that turns one query's hits
    into its final list (see :data:`~mrag_core.hnsw_tuning.VoteFn`).
    """

    def __init__(self, vectors: np.ndarray, metric: str = "cosine", kind: str = "flat", hnsw_m: int | None = None,
                 ef_construction: int = 80, target_recall: float | None = 0.9, calibration_depth: int = 32,
                 votes: dict[str, VoteFn] | None = None, one_pass: bool = True) -> None:
        import faiss

        if target_recall is not None:
            check_target(target_recall)  # before the (slow) build
        x = _prepare(vectors, metric)
        self.n_docs, self.n_spaces, self.dim = x.shape
        self.metric = metric
        self.kind = kind
        self._swig_ptr = faiss.swig_ptr
        self._indexes = []
        self.ef_search: int | None = None  # HNSW: one efSearch for every space, over the calibration
        self.calibration: Calibration | None = None
        self.vote_calibrations: dict[str, Calibration] = {}
        self._hnsw_params: dict[int, object] = {}  # efSearch -> faiss.SearchParametersHNSW
        self._space_params: dict[tuple, list] = {}  # (depth, ef_search, vote) -> params per space
        self._flat_params: list = [None] * self.n_spaces  # flat indexes take no search parameters
        self.hnsw_m = hnsw_m if hnsw_m is not None else (16 if self.dim <= 64 else 32)
        self.scan: FlatScan | None = FlatScan(x) if kind == "flat" and one_pass and self.n_spaces > 1 else None
        for s in range(0 if self.scan is not None else self.n_spaces):
            if kind == "flat":
                index = faiss.IndexFlatIP(self.dim)
            elif kind == "hnsw":
                index = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
                index.hnsw.efConstruction = ef_construction
            else:
                raise ValueError(f"unknown FAISS index kind '{kind}'")
            index.add(np.ascontiguousarray(x[:, s, :]))
            self._indexes.append(index)
        if kind == "hnsw" and target_recall is not None and self.n_docs:
            depth = max(1, min(calibration_depth, self.n_docs))
            sets = calibration_sets(x, depth)  # queries and exact hits once, for the spaces and every vote
            self.calibration = calibrate(self._search_space, x, depth=depth, target=target_recall, sets=sets)
            self.vote_calibrations = calibrate_votes(self._search_all, x, votes or {}, depth=depth,
                                                     target=target_recall, sets=sets)

    def _search_spaces(self, per_space: np.ndarray, depth: int, params: list, spaces: range | list[int]
                       ) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, scores)`` [len(spaces), q, depth] for queries ``per_space`` [len(spaces), q, d], through
        the SWIG entry point with preallocated outputs (the Python wrapper's checks and allocations cost
        about as much as a small head space's search); ``params[j]``: space ``spaces[j]``'s search
        parameters (``None`` for flat indexes)."""
        nq = per_space.shape[1]
        ids = np.empty((len(spaces), nq, depth), np.int64)
        scores = np.empty((len(spaces), nq, depth), np.float32)
        ptr = self._swig_ptr
        for j, s in enumerate(spaces):
            self._indexes[s].search_c(nq, ptr(per_space[j]), depth, ptr(scores[j]), ptr(ids[j]), params[j])
        return ids, scores

    def _search_space(self, space: int, queries: np.ndarray, depth: int, ef: int) -> np.ndarray:
        """Ids [q, depth] from one HNSW space searched with ``efSearch = ef`` (for the calibration)."""
        q = np.ascontiguousarray(queries[None], dtype=np.float32)
        return self._search_spaces(q, depth, [self._params(ef)], [space])[0][0]

    def _search_all(self, queries: np.ndarray, depth: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, scores)`` [q, s, depth] from every space searched with ``efSearch = ef`` (for the vote
        calibration)."""
        per_space = np.ascontiguousarray(queries.transpose(1, 0, 2), dtype=np.float32)
        ids, scores = self._search_spaces(per_space, depth, [self._params(ef)] * self.n_spaces, range(self.n_spaces))
        return ids.transpose(1, 0, 2), scores.transpose(1, 0, 2)

    def _params(self, ef: int):
        """Search parameters with ``efSearch = ef`` (one object per value, kept)."""
        params = self._hnsw_params.get(ef)
        if params is None:
            import faiss

            params = faiss.SearchParametersHNSW()
            params.efSearch = ef
            self._hnsw_params[ef] = params
        return params

    def ef_for(self, space: int, depth: int, vote: str | None = None) -> int:
        """The ``efSearch`` a search of ``depth`` for ``vote`` uses in ``space`` (HNSW only)."""
        if self.ef_search is not None:
            return self.ef_search
        if vote in self.vote_calibrations:
            return self.vote_calibrations[vote].ef_for(space, depth)
        if self.calibration is not None:
            return self.calibration.ef_for(space, depth)
        return max(64, 2 * depth)

    def search_key(self, vote: str | None) -> str | None:
        """Searches for two votes with the same key return the same hits: ``vote`` if it has its own calibration."""
        return vote if self.ef_search is None and vote in self.vote_calibrations else None

    def search(self, queries: np.ndarray, depth: int, vote: str | None = None) -> Hits:
        q = _prepare(queries, self.metric)
        depth = min(depth, self.n_docs)
        if self.scan is not None:
            ids, scores = self.scan.search(q, depth)
            return Hits(ids=ids, scores=scores)
        per_space = np.ascontiguousarray(q.transpose(1, 0, 2))  # [s, q, d]: each space's queries contiguous
        params = self._flat_params
        if self.kind == "hnsw":  # efSearch goes in per call (no shared state: searches may run in parallel threads)
            key = (depth, self.ef_search, self.search_key(vote))
            params = self._space_params.get(key)
            if params is None:  # once per depth and vote, not once per space and query
                params = [self._params(self.ef_for(s, depth, key[2])) for s in range(self.n_spaces)]
                self._space_params[key] = params
        ids, scores = self._search_spaces(per_space, depth, params, range(self.n_spaces))
        return Hits(ids=np.ascontiguousarray(ids.transpose(1, 0, 2)),
                    scores=np.ascontiguousarray(scores.transpose(1, 0, 2)))


def build_index(vectors: np.ndarray, backend: str = "torch", metric: str = "cosine", device: str = "auto",
                target_recall: float | None = 0.9, votes: dict[str, VoteFn] | None = None) -> SpaceIndex:
    """Build a :class:`SpaceIndex` over ``vectors`` [n, s, d] (or [n, d] for one space);
    ``target_recall`` is the recall@32 each HNSW space is calibrated to, and the final-list recall of
    each of ``votes`` (both ignored by exact backends)."""
    if backend == "torch":
        return TorchIndex(vectors, metric=metric, device=device)
    if backend == "faiss-flat":
        return FaissIndex(vectors, metric=metric, kind="flat")
    if backend == "faiss-hnsw":
        return FaissIndex(vectors, metric=metric, kind="hnsw", target_recall=target_recall, votes=votes)
    if backend in ("milvus", "milvus-hnsw"):
        from mrag_core.milvus_backend import build_milvus_index

        return build_milvus_index(vectors, backend, metric, target_recall, votes)
    raise ValueError(f"unknown search backend '{backend}': use one of {', '.join(BACKENDS)}")

