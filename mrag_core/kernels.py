"""Compiled inner loops for single-query latency: per-row top-``c`` selection, a multi-space scan and vote sums.

MRAG selects the top ``c`` of ``h`` score rows instead of one, so at interactive sizes the
selection, not the matmul, decides its latency. The kernels are numba-compiled (numba ships
with umap-learn) and cached on disk; each has a NumPy reference with the same contract, used
when numba is unavailable (or ``MRAG_NO_NUMBA=1``) and in tests to prove they agree.

* :func:`top_c_rows`: for every row of ``scores`` [r, n], the ``c`` largest values and their
  column ids, best first, ties by the smaller id. Short rows: one pass with a size-``c`` min-heap,
  O(n + c log c), one comparison per element against the heap's root (the current ``c``-th best).
  Long rows (n >= 4G, c <= G/2, G = 256) first get a threshold ``t`` that cannot exclude a winner:
  the row is cut into G strided groups ``{j : j mod G = g}``, whose maxima (elementwise maxima of
  consecutive G-blocks, vectorised) are G distinct elements; ``t`` is found by 12 bisection steps
  over their range, each a vectorised count, keeping at least ``c`` of them >= ``t``, so ``t`` is
  <= the row's ``c``-th largest value. One pass in blocks of 32 then counts the elements >= ``t``
  (a vectorised count) and collects them only from the blocks that hold one; the about ``c``
  candidates (on random scores) are ranked by insertion. Every step is a vectorised pass or touches
  about ``c`` elements: no data-dependent branch per element, where a heap select mispredicts on
  each insertion (12 head spaces of 10,000 documents, bmm plus selection: 0.40 ms per query
  instead of 0.44 with heaps for the threshold and the candidates).
* :func:`scan_top_c`: the top ``c`` of every space of several small ones (head spaces) for a query, scored
  and selected in one pass over the block layout of :mod:`mrag_core.flat_scan` (the ``faiss-flat``
  backend's multi-space search), with :func:`top_c_rows`' selection.
* :func:`sum_votes`: ``total(d) = sum of weights[j] over j with ids[j] = d`` (ids < 0 ignored),
  returned for the top ``k`` documents by total, ties broken by the smaller id. Totals are
  accumulated in a small open-addressing hash table, in the input order within each id, so they
  equal ``np.bincount``'s bit for bit; the top ``k`` are then picked with a size-``k`` heap.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

__all__ = ["HAVE_NUMBA", "scan_top_c", "sum_rank_votes", "sum_votes", "sum_votes_reference", "top_c_rows",
           "top_c_rows_reference", "warm_up"]


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
        def _ranks_below(v1: float, i1: int, v2: float, i2: int) -> bool:  # pragma: no cover - compiled
            """(v1, i1) ranks below (v2, i2): a smaller value, or an equal value and a larger id."""
            return v1 < v2 or (v1 == v2 and i1 > i2)

        @numba.njit(cache=True, nogil=True, inline="always")
        def _sift_down(hv: np.ndarray, hi: np.ndarray, c: int, i: int) -> None:  # pragma: no cover - compiled
            """Restore the min-heap (root = the entry that ranks lowest) below position ``i``."""
            while True:
                left = 2 * i + 1
                if left >= c:
                    return
                m = left
                if left + 1 < c and _ranks_below(hv[left + 1], hi[left + 1], hv[left], hi[left]):
                    m = left + 1
                if _ranks_below(hv[m], hi[m], hv[i], hi[i]):
                    hv[m], hv[i] = hv[i], hv[m]
                    hi[m], hi[i] = hi[i], hi[m]
                    i = m
                else:
                    return

        @numba.njit(cache=True, nogil=True, inline="always")
        def _heap_scan(row: np.ndarray, hv: np.ndarray, hi: np.ndarray, c: int, start: int) -> None:  # pragma: no cover
            """Heapify the ``c`` entries in ``hv`` / ``hi`` (a min-heap: root = current c-th best), then
            offer ``row[start:]``; equal scores keep the earlier (smaller) id already held."""
            for i in range(c // 2 - 1, -1, -1):
                _sift_down(hv, hi, c, i)
            thr = hv[0]
            for j in range(start, row.shape[0]):
                v = row[j]
                if v > thr:
                    hv[0] = v
                    hi[0] = j
                    _sift_down(hv, hi, c, 0)
                    thr = hv[0]

        @numba.njit(cache=True, nogil=True, inline="always")
        def _heap_top(values: np.ndarray, hv: np.ndarray, hi: np.ndarray, c: int) -> None:  # pragma: no cover
            """The min-heap of the ``c`` best of ``values`` (``c <= len(values)``), ids = positions."""
            for j in range(c):
                hv[j] = values[j]
                hi[j] = j
            _heap_scan(values, hv, hi, c, c)

        @numba.njit(cache=True, nogil=True, inline="always")
        def _pop_best_first(hv: np.ndarray, hi: np.ndarray, c: int, out_v: np.ndarray,
                            out_i: np.ndarray) -> None:  # pragma: no cover
            """Empty the min-heap into ``out`` best first (equal values: smaller id first): the root
            ranks lowest, so each pop fills the last free place; no allocation, O(c log c)."""
            for pos in range(c - 1, -1, -1):
                out_v[pos] = hv[0]
                out_i[pos] = hi[0]
                hv[0] = hv[pos]
                hi[0] = hi[pos]
                _sift_down(hv, hi, pos, 0)

        @numba.njit(cache=True, nogil=True, inline="always")
        def _collect(row: np.ndarray, t: float, block_size: int, cand_v: np.ndarray,
                     cand_i: np.ndarray) -> int:  # pragma: no cover - compiled
            """Write the elements of ``row`` that are >= ``t`` and their ids to ``cand_v`` / ``cand_i``, in
            id order; a vectorised count per block of ``block_size``, a scalar look only into blocks
            that hold one. Returns how many."""
            w = row.shape[0]
            m = 0
            j = 0
            while j + block_size <= w:
                block = row[j:j + block_size]
                above = 0
                for q in range(block_size):
                    above += block[q] >= t
                if above:
                    for q in range(block_size):
                        if block[q] >= t:
                            cand_v[m] = block[q]
                            cand_i[m] = j + q
                            m += 1
                j += block_size
            for j in range(j, w):
                if row[j] >= t:
                    cand_v[m] = row[j]
                    cand_i[m] = j
                    m += 1
            return m

        @numba.njit(cache=True, nogil=True, inline="always")
        def _seed_threshold(gm: np.ndarray, c: int) -> float:  # pragma: no cover - compiled
            """A value ``t`` with at least ``c`` of ``gm`` >= ``t``, within 2^-12 of the range of ``gm``
            below its ``c``-th largest: 12 bisection steps from ``[min, max]``, each a branch-free
            vectorised count (a heap select branches on every insertion: 3-4 us per row of 256 right
            after the matmul, against well under one). ``gm`` holds distinct elements of one row, so the row
            has at least ``c`` elements >= ``t``: no winner is below it. NaN in ``gm`` only lowers
            ``t`` or makes it NaN (then nothing passes and the caller falls back to the plain heap)."""
            lo = gm[0]
            hi = gm[0]
            for v in gm:
                lo = min(lo, v)
                hi = max(hi, v)
            for _ in range(12):  # invariant: count(gm >= lo) >= c
                mid = np.float32(lo + (hi - lo) * np.float32(0.5))
                count = 0
                for v in gm:
                    count += v >= mid
                if count >= c:
                    lo = mid
                else:
                    hi = mid
            return lo

        @numba.njit(cache=True, nogil=True, inline="always")
        def _insert_top(cand_v: np.ndarray, cand_i: np.ndarray, m: int, c: int, out_v: np.ndarray,
                        out_i: np.ndarray) -> None:  # pragma: no cover - compiled
            """The ``c`` best of the first ``m`` (>= ``c``) candidates, held in id order, into ``out``
            best first by insertion: a candidate enters only if it beats the current ``c``-th (an equal
            score has a larger id, so it ranks below), and equal scores keep arrival (id) order. About
            ``c`` candidates reach it in the seeded paths, so this beats a heap plus ``c`` pops."""
            filled = 0
            for j in range(m):
                v = cand_v[j]
                if filled == c:
                    if not v > out_v[c - 1]:
                        continue
                    pos = c - 1
                else:
                    pos = filled
                    filled += 1
                while pos > 0 and v > out_v[pos - 1]:
                    out_v[pos] = out_v[pos - 1]
                    out_i[pos] = out_i[pos - 1]
                    pos -= 1
                out_v[pos] = v
                out_i[pos] = cand_i[j]

        @numba.njit(cache=True, nogil=True, inline="always")
        def _top_c_row(row: np.ndarray, c: int, groups: int, block_size: int, hv: np.ndarray, hi: np.ndarray,
                       gm: np.ndarray, cand_v: np.ndarray, cand_i: np.ndarray, out_v: np.ndarray,
                       out_i: np.ndarray) -> None:  # pragma: no cover - compiled
            """The top ``c`` of ``row`` into ``out_v`` / ``out_i``, best first. ``groups`` > 0 (with
            ``c <= groups <= n``): the candidates are the elements >= ``t``, a value at most the
            ``c``-th largest of the row's ``groups`` strided-group maxima (:func:`_seed_threshold`),
            collected by one pass in blocks of ``block_size`` (:func:`_collect`; a run-time value: a
            compile-time constant gets the count loop unrolled, not vectorised) and ranked by
            :func:`_insert_top`; 0: a plain heap over the row. Fewer than ``c`` candidates (only
            possible with NaN) also take the plain heap. ``hv``, ``hi`` [c], ``gm`` [groups],
            ``cand_v``, ``cand_i`` [n]: scratch."""
            n = row.shape[0]
            m = 0
            if groups:
                gm[:] = row[:groups]  # strided groups {j : j mod G = g}: elementwise maxima, vectorised
                for b in range(1, n // groups):
                    np.maximum(gm, row[b * groups:(b + 1) * groups], gm)
                t = _seed_threshold(gm, c)  # <= the c-th largest group maximum <= the row's c-th largest
                m = _collect(row, t, block_size, cand_v, cand_i)
            if m >= c:
                _insert_top(cand_v, cand_i, m, c, out_v, out_i)
            else:
                _heap_top(row, hv, hi, c)
                _pop_best_first(hv, hi, c, out_v, out_i)

        @numba.njit(cache=True, nogil=True, inline="always")
        def _row_scratch(n: int, c: int, groups: int) -> tuple:  # pragma: no cover - compiled
            """The scratch arrays of :func:`_top_c_row` for rows of ``n``: ``(hv, hi, gm, cand_v, cand_i)``."""
            return (np.empty(c, np.float32), np.empty(c, np.int64), np.empty(max(groups, 1), np.float32),
                    np.empty(n if groups else 0, np.float32), np.empty(n if groups else 0, np.int64))

        @numba.njit(cache=True, nogil=True)
        def _top_c_rows(scores: np.ndarray, c: int, groups: int,
                        block_size: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
            """:func:`_top_c_row` for every row of ``scores`` [r, n]."""
            r, n = scores.shape
            ids = np.empty((r, c), np.int64)
            vals = np.empty((r, c), np.float32)
            hv, hi, gm, cand_v, cand_i = _row_scratch(n, c, groups)
            for row_i in range(r):
                _top_c_row(scores[row_i], c, groups, block_size, hv, hi, gm, cand_v, cand_i, vals[row_i], ids[row_i])
            return ids, vals

        @numba.njit(cache=True, nogil=True, fastmath={"contract"})
        def _scan_top_c(xb: np.ndarray, queries: np.ndarray, n: int, c: int, groups: int,
                        block_size: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
            """Every query's top ``c`` in every space of the block layout ``xb`` [s, n_blocks, d, width] (``n``
            real documents): per space, a block's ``width`` scores are ``d`` passes of independent multiply-adds
            into one row of scores, whose top ``c`` :func:`_top_c_row` selects."""
            s, n_blocks, d, width = xb.shape
            nq = queries.shape[0]
            ids = np.empty((nq, s, c), np.int64)
            vals = np.empty((nq, s, c), np.float32)
            row = np.empty(n_blocks * width, np.float32)
            hv, hi, gm, cand_v, cand_i = _row_scratch(n, c, groups)
            for qi in range(nq):
                for space in range(s):
                    q = queries[qi, space]
                    for b in range(n_blocks):
                        block = xb[space, b]
                        out = row[b * width:(b + 1) * width]
                        w = q[0]
                        first = block[0]
                        for j in range(width):
                            out[j] = w * first[j]
                        for t in range(1, d):
                            w = q[t]
                            dim = block[t]
                            for j in range(width):
                                out[j] += w * dim[j]
                    _top_c_row(row[:n], c, groups, block_size, hv, hi, gm, cand_v, cand_i, vals[qi, space],
                               ids[qi, space])
            return ids, vals

        @numba.njit(cache=True, nogil=True)
        def _sum_votes(ids: np.ndarray, weights: np.ndarray,
                       k: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
            m = ids.shape[0]
            size = 16
            while size < 2 * m:
                size *= 2
            mask = size - 1
            keys = np.full(size, -1, np.int64)
            slot = np.empty(size, np.int64)
            uniq = np.empty(m, np.int64)
            totals = np.empty(m, np.float64)
            u = 0
            for j in range(m):  # input order: each id's weights are summed as bincount sums them
                d = ids[j]
                if d < 0:
                    continue
                h = (d ^ (d >> 9) ^ (d >> 17)) & mask
                while keys[h] != -1 and keys[h] != d:
                    h = (h + 1) & mask
                if keys[h] == -1:
                    keys[h] = d
                    slot[h] = u
                    uniq[u] = d
                    totals[u] = 0.0
                    u += 1
                totals[slot[h]] += weights[j]
            k = min(k, u)
            ht = np.empty(k, np.float64)  # min-heap: the root ranks lowest of the k best so far
            hi = np.empty(k, np.int64)
            for j in range(k):
                ht[j] = totals[j]
                hi[j] = uniq[j]
            for start in range(k // 2 - 1, -1, -1):
                _sift_down(ht, hi, k, start)
            for j in range(k, u):
                if _ranks_below(ht[0], hi[0], totals[j], uniq[j]):
                    ht[0] = totals[j]
                    hi[0] = uniq[j]
                    _sift_down(ht, hi, k, 0)
            out_ids = np.empty(k, np.int64)
            out_totals = np.empty(k, np.float64)
            _pop_best_first(ht, hi, k, out_totals, out_ids)
            return out_ids, out_totals

        @numba.njit(cache=True, nogil=True)
        def _sum_rank_votes(ids: np.ndarray, scale: np.ndarray,
                            k: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
            s_count, c = ids.shape
            weights = np.empty(s_count * c, np.float64)
            for i in range(s_count):
                w = 1.0
                for p in range(c):  # scale[i] * 2^-p: halving is exact, as is the product with a power of two
                    weights[i * c + p] = scale[i] * w
                    w *= 0.5
            return _sum_votes(ids.reshape(-1), weights, k)


_GROUPS = 256  # strided groups for the seeded top-c threshold
_BLOCK = 32  # elements per vectorised count in the seeded candidate pass


def _groups_for(n: int, c: int) -> int:
    """The seeded path's group count for rows of ``n`` and depth ``c`` (0: the plain heap)."""
    return _GROUPS if n >= 4 * _GROUPS and c <= _GROUPS // 2 else 0


def top_c_rows(scores: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``c`` per row of ``scores`` [r, n] (float32): ``(ids [r, c] int64, values [r, c])``, best
    first; equal scores are ordered by the smaller column id. ``c`` is clamped to ``n``. Scores
    must be finite (the backends reject NaN / inf vectors when they are indexed or queried)."""
    scores = np.ascontiguousarray(scores, dtype=np.float32)
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D [rows, n], got shape {scores.shape}")
    r, n = scores.shape
    c = min(int(c), n)
    if not HAVE_NUMBA or c <= 0 or r == 0:
        return top_c_rows_reference(scores, c)
    return _top_c_rows(scores, c, _groups_for(n, c), _BLOCK)


def scan_top_c(blocks: np.ndarray, queries: np.ndarray, n: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Every query's top ``c`` (``1 <= c <= n``) in every space of ``blocks``, the block layout of :mod:`mrag_core.
    flat_scan` ([s, n_blocks, d, width] float32, ``n`` real documents, zeros past them) scored against
    ``queries`` [q, s, d] float32 by inner product: ``(ids [q, s, c] int64, scores [q, s, c])``, best first, equal
    scores by the smaller id (:func:`top_c_rows`' selection). Needs numba (:data:`HAVE_NUMBA`)."""
    return _scan_top_c(blocks, queries, int(n), int(c), _groups_for(n, c), _BLOCK)


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


def sum_rank_votes(ids: np.ndarray, scale: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sum_votes` with ``weights[s, p] = scale[s] * 2^-p``: hits ``ids`` [s, c] listed best
    first per space (``scale`` = head importance for MRAG, ones for the decay vote). The weights are
    made inside the compiled call, so one query's vote is a single call."""
    ids2 = np.ascontiguousarray(ids, dtype=np.int64)
    scale = np.ascontiguousarray(scale, dtype=np.float64).reshape(-1)
    if ids2.ndim != 2 or scale.shape[0] != ids2.shape[0]:
        raise ValueError(f"ids must be [spaces, c] with one scale per space, got {np.shape(ids)} and {np.shape(scale)}")
    if not HAVE_NUMBA or k <= 0:
        weights = scale[:, None] * np.exp2(-np.arange(ids2.shape[1], dtype=np.float64))
        return sum_votes_reference(ids2, weights, max(k, 0))
    return _sum_rank_votes(ids2, scale, int(k))


def warm_up() -> None:
    """Compile (or load from the on-disk cache) the kernels now rather than on the first search."""
    top_c_rows(np.arange(8, dtype=np.float32).reshape(2, 4), 2)
    sum_votes(np.array([[1, 2], [2, -1]]), np.ones((2, 2)), 2)
    sum_rank_votes(np.array([[1, 2], [2, -1]]), np.ones(2), 2)
    if HAVE_NUMBA:
        scan_top_c(np.ones((2, 1, 3, 4), np.float32), np.ones((1, 2, 3), np.float32), 4, 2)
