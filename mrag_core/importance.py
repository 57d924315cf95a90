"""Head importance (MRAG paper, Algorithm 1), computed once per corpus.

For embedding space ``i`` with document vectors ``e_1..e_n``::

    a_i = (1/n) * sum_j ||e_j||                                  (mean L2 norm: how loud the head is)
    b_i = mean over sampled pairs (u, v), u != v, of 1 - cos(e_u, e_v)   (spread: how diverse)
    s_i = a_i * b_i

Pairs are sampled with a seeded generator: ``pairs_per_doc`` random partners for every
document, so the cost is O(n * m * d), never O(n^2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class HeadImportance:
    """Per-space importance: ``score = norm * spread``."""

    norm: np.ndarray
    spread: np.ndarray
    score: np.ndarray

    def to_dict(self) -> dict[str, list[float]]:
        return {"norm": self.norm.tolist(), "spread": self.spread.tolist(), "score": self.score.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, list[float]]) -> "HeadImportance":
        return cls(np.asarray(d["norm"], np.float64), np.asarray(d["spread"], np.float64),
                   np.asarray(d["score"], np.float64))


def mean_norms(vectors: np.ndarray) -> np.ndarray:
    """``a_i`` for ``vectors`` [n, s, d]: mean over documents of the L2 norm in each space."""
    return np.linalg.norm(vectors.astype(np.float64), axis=2).mean(axis=0)


def sample_pairs(n: int, pairs_per_doc: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n * pairs_per_doc`` index pairs (u, v) with u != v: every u gets random partners."""
    if n < 2:
        raise ValueError("head importance needs at least two documents")
    rng = np.random.default_rng(seed)
    u = np.repeat(np.arange(n), pairs_per_doc)
    offset = rng.integers(1, n, size=u.shape[0])  # 1..n-1 so that v != u
    v = (u + offset) % n
    return u, v


def mean_cosine_distance(vectors: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``b_i``: mean over pairs of ``1 - cos(e_u, e_v)`` in each space of ``vectors`` [n, s, d]."""
    x = vectors.astype(np.float64)
    norms = np.linalg.norm(x, axis=2, keepdims=True)
    unit = x / np.where(norms == 0, 1.0, norms)
    cos = np.einsum("psd,psd->ps", unit[u], unit[v])
    return (1.0 - cos).mean(axis=0)


def head_importance(vectors: np.ndarray, *, pairs_per_doc: int = 16, seed: int = 0) -> HeadImportance:
    """``s_i = a_i * b_i`` for every space of ``vectors`` [n, s, d] (heads, or split pieces)."""
    n = vectors.shape[0]
    u, v = sample_pairs(n, min(pairs_per_doc, n - 1) if n > 1 else pairs_per_doc, seed)
    norm = mean_norms(vectors)
    spread = mean_cosine_distance(vectors, u, v)
    return HeadImportance(norm=norm, spread=spread, score=norm * spread)
