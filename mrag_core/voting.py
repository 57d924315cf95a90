"""Vote arithmetic that turns per-space rankings into one ranking, and Reciprocal Rank Fusion.

MRAG vote (paper): space ``i`` returns its top-``c`` documents; the document at 0-based rank
``p`` receives ``w(s_i, p, d)`` votes; votes are summed per document and the top-``k`` win.

=================  =========================  ====================================
variant            w(s_i, p, d)               authors' name
=================  =========================  ====================================
``importance``     s_i * 2^-p                 ``mrag`` (default)
``decay``          2^-p                       ``mrag-strategy-decay``, ``split-rag``
``distance``       1 / d  (d = 1 - cos)       ``mrag-strategy-distance``
=================  =========================  ====================================

RRF (``reciprocal_rank_fusion``, from :mod:`mrag_core.rrf`): ``score(d) = sum over lists of 1 / (60 + rank)``,
rank from 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from mrag_core.kernels import sum_rank_votes, sum_votes

VARIANTS = ("importance", "decay", "distance")
RRF_K = 60


def similarity_to_distance(scores: np.ndarray, metric: str) -> np.ndarray:
    """Distance used by the 1/distance vote: ``1 - cos`` for cosine, ``-ip`` for inner product."""
    return 1.0 - scores if metric == "cosine" else -scores


@lru_cache(maxsize=64)
def _decay_table(c: int) -> np.ndarray:
    """``2^-p`` for p = 0..c-1 (float64, read-only; shared by every query)."""
    table = np.exp2(-np.arange(c, dtype=np.float64))
    table.flags.writeable = False
    return table


def hit_weights(importance: np.ndarray, scores: np.ndarray, variant: str, metric: str = "cosine") -> np.ndarray:
    """Votes for hits listed best first in each space: column ``p`` of ``scores`` [s, c] is rank ``p``.

    ``importance``: s_i * 2^-p; ``decay``: 2^-p; ``distance``: 1 / d with d = 1 - cos or -ip from
    ``scores``, clipped at 1e-6. 2^-p comes from a cached table, so the usual vote costs one
    multiply per query; distances are computed only for the ``distance`` variant.
    """
    s_count, c = scores.shape
    if variant == "importance":
        return np.asarray(importance, dtype=np.float64)[:, None] * _decay_table(c)
    if variant == "decay":
        return np.broadcast_to(_decay_table(c), (s_count, c))
    if variant == "distance":
        return 1.0 / np.maximum(similarity_to_distance(scores, metric).astype(np.float64), 1e-6)
    raise ValueError(f"unknown voting variant '{variant}': use one of {', '.join(VARIANTS)}")


def vote_hits(ids: np.ndarray, scores: np.ndarray, importance: np.ndarray, variant: str, k: int,
              metric: str = "cosine", *, with_evidence: bool = True) -> "VoteResult":
    """One query's vote over its hits ``ids`` / ``scores`` [s, c], listed best first per space.

    Equal to ``vote(ids, hit_weights(importance, scores, variant, metric), k)``; without evidence
    the ``importance`` and ``decay`` votes run as one compiled call (weights made inside it).
    """
    if not with_evidence and variant in ("importance", "decay"):
        scale = importance if variant == "importance" else np.ones(ids.shape[0])
        doc_ids, totals = sum_rank_votes(ids, scale, k)
        return VoteResult(doc_ids=doc_ids, scores=totals)
    return vote(ids, hit_weights(importance, scores, variant, metric), k, with_evidence=with_evidence)


@dataclass
class VoteResult:
    """Ranked documents with their total votes and the evidence behind them.

    ``evidence[doc]`` lists ``(space, rank, contribution)`` for every space that retrieved ``doc``.
    """

    doc_ids: np.ndarray
    scores: np.ndarray
    evidence: dict[int, list[tuple[int, int, float]]] = field(default_factory=dict)


def vote(ids: np.ndarray, weights: np.ndarray, k: int, *, with_evidence: bool = True) -> VoteResult:
    """Sum ``weights`` [s, c] per document id in ``ids`` [s, c]; return the top ``k`` by total.

    Ties are broken by the smaller document id (deterministic). Ids < 0 (missing hits) are ignored.
    """
    doc_ids, totals = sum_votes(ids, weights, k)
    result = VoteResult(doc_ids=doc_ids, scores=totals)
    if with_evidence:
        keep = set(result.doc_ids.tolist())
        ev: dict[int, list[tuple[int, int, float]]] = {int(d): [] for d in result.doc_ids}
        s_count, c = ids.shape
        for s in range(s_count):
            for p in range(c):
                d = int(ids[s, p])
                if d in keep:
                    ev[d].append((s, p, float(weights[s, p])))
        result.evidence = ev
    return result
