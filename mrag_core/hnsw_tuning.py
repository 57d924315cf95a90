"""efSearch chosen per space for a recall target, measured against exact search at build time.

HNSW's ``efSearch`` (the size of the candidate list a search keeps) trades speed for recall, and
the recall one ``efSearch`` buys depends on the space: on MiniLM-shaped random vectors at 10,000
documents, ``efSearch = 64`` gives recall@32 of about 0.95 in a 32-d head space but 0.65 in the
384-d standard space. A fixed ``efSearch`` therefore compares MRAG and Standard at different
accuracies. Instead, each space is calibrated once when the index is built:

* pseudo-queries: the mean of two random documents of the space (a query between two topics,
  the case MRAG is for), ``count`` of them, seeded;
* ground truth: exact inner-product top-``c`` (the vectors are already normalised for cosine);
* ``recall@c = |approximate top-c ∩ exact top-c| / c``, averaged over the pseudo-queries;
* ``efSearch`` for the space: the first value of the ladder ``c, 1.5c, 2c, 3c, 4c, 6c, ...,
  64c`` (capped at ``n``) whose recall reaches the target; the last one if none does (its recall
  is recorded, so callers can say the target was missed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from mrag_core.kernels import top_c_rows

SearchSpace = Callable[[int, np.ndarray, int, int], np.ndarray]
"""``search(space, queries [q, d], depth, ef) -> ids [q, depth]``: one space's approximate search."""


@dataclass(frozen=True)
class Calibration:
    """Per-space ``ef`` [s] and the ``recall`` [s] it reached at ``depth``, for ``target``."""

    ef: np.ndarray
    recall: np.ndarray
    depth: int
    target: float

    @property
    def met(self) -> bool:
        """Whether every space reached the target."""
        return bool((self.recall >= self.target).all())

    def ef_for(self, space: int, depth: int) -> int:
        """``efSearch`` for a search of ``depth``: the calibrated value, scaled up for deeper searches
        (``ceil(ef * depth / calibrated depth)``); shallower searches keep it (recall@k only rises as k falls)."""
        ef = int(self.ef[space])
        return max(ef, -(-ef * depth // self.depth))


def check_target(target: float) -> float:
    """``target`` if it is a recall in (0, 1], else ``ValueError`` with the reason."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"the recall target must be above 0 and at most 1, got {target}")
    return float(target)


def describe(name: str, cal: Calibration) -> str:
    """One line for logs and the UI, e.g. ``heads: efSearch 48-64, recall@32 0.92-0.95 (target 0.90)``."""
    def span(values: np.ndarray, fmt: str) -> str:
        lo, hi = values.min(), values.max()
        return format(lo, fmt) if lo == hi else f"{lo:{fmt}}-{hi:{fmt}}"

    missed = "" if cal.met else f", below target in {int((cal.recall < cal.target).sum())} of {len(cal.ef)} spaces"
    return (f"{name}: efSearch {span(cal.ef, 'd')}, recall@{cal.depth} {span(cal.recall, '.2f')} "
            f"(target {cal.target:.2f}{missed})")


def ef_ladder(depth: int, n_docs: int, max_factor: int = 64) -> list[int]:
    """``c, 1.5c, 2c, 3c, 4c, 6c, 8c, ...`` up to ``max_factor * c``, capped at ``n_docs``, without repeats."""
    steps, factor = [], 1
    while factor <= max_factor:
        steps += [depth * factor, depth * factor * 3 // 2]
        factor *= 2
    out: list[int] = []
    for ef in steps:
        ef = min(max(ef, depth), max(n_docs, depth))
        if ef <= depth * max_factor and ef not in out:
            out.append(ef)
    return out


def pseudo_queries(x: np.ndarray, count: int, seed: int = 0) -> np.ndarray:
    """``count`` queries [count, s, d]: each the mean of two different random documents of ``x`` [n, s, d]
    (the same two in every space). With one document, that document."""
    n = x.shape[0]
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, size=count)
    b = (a + rng.integers(1, max(n, 2), size=count)) % n if n > 1 else a
    return ((x[a].astype(np.float64) + x[b]) / 2).astype(np.float32)


def recall_at(got: np.ndarray, exact: np.ndarray) -> float:
    """Mean over rows of ``|got ∩ exact| / depth`` for id lists [q, depth] (ids < 0 are misses)."""
    depth = exact.shape[1]
    hits = [len(set(g[g >= 0].tolist()) & set(e.tolist())) / depth for g, e in zip(got, exact)]
    return float(np.mean(hits)) if hits else 1.0


def exact_top(x_space: np.ndarray, queries: np.ndarray, depth: int) -> np.ndarray:
    """Exact inner-product top-``depth`` ids [q, depth] of ``queries`` [q, d] over ``x_space`` [n, d]."""
    scores = np.ascontiguousarray(queries @ x_space.T, dtype=np.float32)
    return top_c_rows(scores, depth)[0]


def calibrate(search: SearchSpace, x: np.ndarray, depth: int = 32, target: float = 0.9, count: int = 64,
              seed: int = 0) -> Calibration:
    """Smallest ladder ``efSearch`` per space of ``x`` [n, s, d] whose recall@``depth`` reaches ``target``."""
    target = check_target(target)
    n, s_count, _ = x.shape
    depth = max(1, min(depth, n))
    queries = pseudo_queries(x, count, seed)
    ladder = ef_ladder(depth, n)
    efs, recalls = np.zeros(s_count, np.int64), np.zeros(s_count)
    for s in range(s_count):
        q = np.ascontiguousarray(queries[:, s, :])
        exact = exact_top(x[:, s, :], q, depth)
        for ef in ladder:
            r = recall_at(search(s, q, depth, ef), exact)
            if r >= target:
                break
        efs[s], recalls[s] = ef, r
    return Calibration(ef=efs, recall=recalls, depth=depth, target=target)


DEPTH_SENSITIVE_VOTES = ("distance",)
"""Votes whose weights do not decay with rank (``distance``: 1/d), so a document deep in a head's list
counts almost as much as one at the top: their final lists need each head's whole top ``c`` right."""


def vote_caveat(backend: str, variants: Iterable[str]) -> str | None:
    """A warning for the UI and the CLI when an approximate backend serves a depth-sensitive vote, else ``None``.

    HNSW's ``efSearch`` is calibrated to per-list recall@32, which is plenty for the rank-decayed votes
    (``importance``, ``decay``: 2^-p puts the weight on each head's top ranks) but not for ``distance``:
    on 10,000 MiniLM-shaped random vectors, at the calibrated head ``efSearch`` its final top 10 reached
    recall 0.82-0.89 against 0.98-0.99 for the ``importance`` vote (``bench/engine.py``).
    """
    sensitive = sorted({v for v in variants if v in DEPTH_SENSITIVE_VOTES})
    if backend != "faiss-hnsw" or not sensitive:
        return None
    return (f"The {', '.join(sensitive)} vote weighs deep ranks almost as much as the top ones, so on the approximate "
            "faiss-hnsw backend its results can differ noticeably from exact search (HNSW is calibrated per head "
            "list, which suits the rank-decayed votes). Use torch or faiss-flat to compare it exactly.")
