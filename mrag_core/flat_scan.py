"""Exact search of several small spaces in one compiled pass: the ``faiss-flat`` backend's head and split spaces.

FAISS searches each space on its own, and per document it makes a call and a heap test: at 32
dimensions those cost more than the arithmetic, so 12 head spaces of 10,000 documents took 1.4-1.75x one
384-d search of the same numbers (``bench/engine.py`` prints FAISS alone). :class:`FlatScan` reads
the numbers once per query instead, as one flat search of the concatenated vector does:

* layout ``[s, n_blocks, d, BLOCK]``: each space's documents in blocks of :data:`BLOCK`, dimension-major
  within a block (zero-padded to whole blocks, 64-byte aligned);
* ``scores[s, j] = sum_t q[s, t] * x[j, s, t]``: for one block, ``d`` passes of ``BLOCK`` independent
  multiply-adds (vectorised; the block's scores stay in L1), into one row of ``n`` scores per space;
* the row's top ``c`` by :func:`mrag_core.kernels.top_c_rows`'s selection: best first, equal scores by
  the smaller id, as the ``torch`` backend orders them.

This module lays the vectors out; the compiled loop is :func:`mrag_core.kernels.scan_top_c`.

Without numba (or with ``MRAG_NO_NUMBA=1``) :func:`scan_top_c_reference` answers (einsum, stable sort).
"""

from __future__ import annotations

import numpy as np

from mrag_core import kernels

__all__ = ["BLOCK", "FlatScan", "block_layout", "scan_top_c_reference"]

BLOCK = 64
"""Documents per block: 64 x 32 dimensions x 4 bytes = 8 KiB, in L1 with the block's 64 scores."""

_ALIGN = 64  # bytes: whole cache lines, and one AVX-512 register per 16 floats


def block_layout(x: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """``x`` [n, s, d] as [s, ceil(n / block), d, block] float32: ``out[i, b, t, j] = x[b * block + j, i, t]``,
    zeros past ``n``; the array's data starts on a 64-byte boundary."""
    n, s, d = x.shape
    n_blocks = -(-n // block)
    size = s * n_blocks * d * block
    raw = np.empty(size * 4 + _ALIGN, np.uint8)
    start = -raw.ctypes.data % _ALIGN
    out = raw[start:start + size * 4].view(np.float32).reshape(s, n_blocks, d, block)
    padded = np.zeros((n_blocks * block, s, d), np.float32)
    padded[:n] = x
    out[:] = padded.reshape(n_blocks, block, s, d).transpose(2, 0, 3, 1)
    return out


def scan_top_c_reference(x: np.ndarray, queries: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy reference of :meth:`FlatScan.search`: ``x`` [n, s, d], ``queries`` [q, s, d] -> ``(ids, scores)``
    [q, s, min(c, n)], each space's scores sorted best first (stable: equal scores by the smaller id)."""
    scores = np.einsum("qsd,nsd->qsn", queries.astype(np.float32), x.astype(np.float32))
    nq, s, n = scores.shape
    ids, vals = kernels.top_c_rows_reference(scores.reshape(nq * s, n), c)
    return ids.reshape(nq, s, -1), vals.reshape(nq, s, -1)


class FlatScan:
    """Exact inner-product search over ``s`` spaces of prepared vectors ``x`` [n, s, d] (normalised already
    for cosine): one pass over the numbers per query (see the module docstring)."""

    def __init__(self, x: np.ndarray) -> None:
        self.n_docs, self.n_spaces, self.dim = x.shape
        self._compiled = kernels.HAVE_NUMBA and self.n_docs > 0
        # the block layout for the compiled scan, or the vectors as given for the reference
        self._x = block_layout(x) if self._compiled else np.ascontiguousarray(x, dtype=np.float32)

    def search(self, queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """``(ids [q, s, c], scores [q, s, c])`` for ``queries`` [q, s, d], ``c = min(depth, n)``: each space's
        best first, equal scores by the smaller id."""
        c = max(0, min(int(depth), self.n_docs))
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if not self._compiled:
            return scan_top_c_reference(self._x, q, c)
        if c == 0:
            empty = (q.shape[0], self.n_spaces, 0)
            return np.empty(empty, np.int64), np.empty(empty, np.float32)
        return kernels.scan_top_c(self._x, q, self.n_docs, c)

