"""Compiled inner loops for single-query latency: per-row top-``c`` selection and vote sums.

MRAG selects the top ``c`` of ``h`` score rows instead of one, so at interactive sizes the
selection, not the matmul, decides its latency. Both kernels are numba-compiled (numba ships
with umap-learn) and cached on disk; each has a NumPy reference with the same contract, used
when numba is unavailable (or ``MRAG_NO_NUMBA=1``) and in tests to prove they agree.

* :func:`top_c_rows`: for every row of ``scores`` [r, n], the ``c`` largest values and their
  column ids, best first, in one pass with a size-``c`` min-heap: O(n + c log c) per row, one
  comparison per element against the heap's root (the current ``c``-th best).
* :func:`sum_votes`: ``total(d) = sum of weights[j] over j with ids[j] = d`` (ids < 0 ignored),
  returned for the top ``k`` documents by total, ties broken by the smaller id. Sums run in the
  input order within each id, so the totals equal ``np.bincount``'s bit for bit.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

__all__ = ["HAVE_NUMBA", "sum_votes", "sum_votes_reference", "top_c_rows", "top_c_rows_reference", "warm_up"]


def top_c_rows_reference(scores: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy reference of :func:`top_c_rows`: a stable sort of each row by descending score."""
    scores = np.asarray(scores, dtype=np.float32)
    c = min(int(c), scores.shape[1])
    ids = np.argsort(-scores, axis=1, kind="stable")[:, : max(c, 0)].astype(np.int64)
    return ids, np.take_along_axis(scores, ids, axis=1)


def sum_votes_reference(ids: np.ndarray, weights: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy reference of :func:`sum_votes` (``np.unique`` + ``np.bincount`` + ``np.lexsort``)."""
    flat_ids = np.asarray(ids).reshape(-1)
    flat_w = np.asarray(weights, dtype=np.float64).reshape(-1)
    valid = flat_ids >= 0
    uniq, inv = np.unique(flat_ids[valid], return_inverse=True)
    totals = np.bincount(inv, weights=flat_w[valid], minlength=uniq.shape[0])
    order = np.lexsort((uniq, -totals))[:k]
    return uniq[order].astype(np.int64), totals[order]


try:
    if os.environ.get("MRAG_NO_NUMBA") == "1":
        raise ImportError("disabled by MRAG_NO_NUMBA=1")
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - numba comes with umap-learn
    HAVE_NUMBA = False


if HAVE_NUMBA:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a read-only checkout only loses the on-disk cache

        @numba.njit(cache=True, nogil=True, inline="always")
        def _sift_down(hv: np.ndarray, hi: np.ndarray, c: int, i: int) -> None:  # pragma: no cover - compiled
            while True:
                left = 2 * i + 1
                if left >= c:
                    return
                m = left
                if left + 1 < c and (hv[left + 1] < hv[left] or (hv[left + 1] == hv[left] and hi[left + 1] > hi[left])):
                    m = left + 1
                if hv[m] < hv[i] or (hv[m] == hv[i] and hi[m] > hi[i]):
                    hv[m], hv[i] = hv[i], hv[m]
                    hi[m], hi[i] = hi[i], hi[m]
                    i = m
                else:
                    return

        @numba.njit(cache=True, nogil=True)
        def _top_c_rows(scores: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
            r, n = scores.shape
            ids = np.empty((r, c), np.int64)
            vals = np.empty((r, c), np.float32)
            hv = np.empty(c, np.float32)
            hi = np.empty(c, np.int64)
            for row_i in range(r):
                row = scores[row_i]
                for j in range(c):
                    hv[j] = row[j]
                    hi[j] = j
                for start in range(c // 2 - 1, -1, -1):
                    _sift_down(hv, hi, c, start)
                thr = hv[0]
                for j in range(c, n):
                    v = row[j]
                    if v > thr:  # equal scores keep the earlier (smaller) id
                        hv[0] = v
                        hi[0] = j
                        _sift_down(hv, hi, c, 0)
                        thr = hv[0]
                # best first; equal values by smaller id
                order = np.argsort(hi, kind="mergesort")
                order = order[np.argsort(-hv[order], kind="mergesort")]
                for j in range(c):
                    vals[row_i, j] = hv[order[j]]
                    ids[row_i, j] = hi[order[j]]
            return ids, vals

        @numba.njit(cache=True, nogil=True)
        def _sum_votes(ids: np.ndarray, weights: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
            order = np.argsort(ids, kind="mergesort")  # stable: each id's weights keep their input order
            uniq = np.empty(ids.shape[0], np.int64)
            totals = np.empty(ids.shape[0], np.float64)
            m = -1
            prev = -1
            for j in order:
                d = ids[j]
                if d < 0:
                    continue
                if m < 0 or d != prev:
                    m += 1
                    uniq[m] = d
                    totals[m] = 0.0
                    prev = d
                totals[m] += weights[j]
            m += 1
            uniq = uniq[:m]
            totals = totals[:m]
            best = np.argsort(-totals, kind="mergesort")[:k]  # uniq ascending + stable sort: ties by smaller id
            return uniq[best], totals[best]


def top_c_rows(scores: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``c`` per row of ``scores`` [r, n] (float32): ``(ids [r, c] int64, values [r, c])``, best
    first; equal scores are ordered by the smaller column id. ``c`` is clamped to ``n``. Scores
    must be finite (the backends reject NaN / inf vectors when they are indexed or queried)."""
    scores = np.ascontiguousarray(scores, dtype=np.float32)
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D [rows, n], got shape {scores.shape}")
    c = min(int(c), scores.shape[1])
    if not HAVE_NUMBA or c <= 0 or scores.shape[0] == 0:
        return top_c_rows_reference(scores, c)
    return _top_c_rows(scores, c)


def sum_votes(ids: np.ndarray, weights: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(doc_ids [<=k], totals)``: the ``k`` documents with the largest summed ``weights``;
    ``ids`` and ``weights`` have the same shape; ids < 0 are ignored; ties by the smaller id."""
    flat_ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
    flat_w = np.ascontiguousarray(weights, dtype=np.float64).reshape(-1)
    if flat_ids.shape != flat_w.shape:
        raise ValueError(f"ids {np.shape(ids)} and weights {np.shape(weights)} differ in shape")
    if not HAVE_NUMBA or k <= 0:
        return sum_votes_reference(flat_ids, flat_w, max(k, 0))
    return _sum_votes(flat_ids, flat_w, int(k))


def warm_up() -> None:
    """Compile (or load from the on-disk cache) both kernels now rather than on the first search."""
    top_c_rows(np.arange(8, dtype=np.float32).reshape(2, 4), 2)
    sum_votes(np.array([[1, 2], [2, -1]]), np.ones((2, 2)), 2)
