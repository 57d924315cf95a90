"""Retrieval strategies: Standard, MRAG, Split RAG, Fusion RAG and Fusion MRAG.

All strategies consume query embeddings from one forward pass (:class:`Embeddings`) and a
:class:`CorpusIndex`. Parameters: ``k`` documents returned, ``c`` = per-space search depth.

* Standard: top-``k`` in the standard space.
* MRAG: top-``c`` in every head space, votes ``w(s_i, p, d)`` (see :mod:`mrag_core.voting`), top-``k``.
* Split RAG: the same vote over the ``h`` pieces of the standard vector (``decay`` or ``importance``).
* Fusion RAG: each sub-query searched in the standard space (depth ``c``), lists merged by RRF.
* Fusion MRAG: MRAG per sub-query (per-head depth ``c``, top ``c``), lists merged by RRF.

Every MRAG/Split result carries its evidence: which spaces retrieved each returned document,
at which 0-based rank, and the vote contribution; plus the raw per-space hit lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mrag_core.backends import Hits
from mrag_core.corpus_index import CorpusIndex
from mrag_core.extraction import Embeddings
from mrag_core.rrf import reciprocal_rank_fusion
from mrag_core.settings import DEFAULT_C
from mrag_core.voting import vote_hits


@dataclass(frozen=True)
class SpaceHit:
    """One space's vote for a document: space index, 0-based rank there, and the vote it added."""

    space: int
    rank: int
    contribution: float


@dataclass
class Retrieved:
    """A ranked list with scores, plus evidence for vote-based strategies.

    ``space_ids`` / ``space_scores`` [s, c] are the raw per-space lists (MRAG / Split), for the
    heads x documents view. For fusion strategies ``sub_rankings`` holds each sub-query's list.
    """

    strategy: str
    doc_ids: list[int]
    scores: list[float]
    evidence: dict[int, list[SpaceHit]] = field(default_factory=dict)
    space_ids: np.ndarray | None = None
    space_scores: np.ndarray | None = None
    sub_rankings: list[list[int]] = field(default_factory=list)


def _vote_from_hits(ids: np.ndarray, scores: np.ndarray, importance: np.ndarray, variant: str, metric: str,
                    k: int, strategy: str, with_evidence: bool = True) -> Retrieved:
    """Vote over one query's per-space hits ``ids`` / ``scores`` [s, c]."""
    res = vote_hits(ids, scores, importance, variant, k, metric, with_evidence=with_evidence)
    evidence = {d: [SpaceHit(s, p, w) for (s, p, w) in hits] for d, hits in res.evidence.items()}
    return Retrieved(strategy, res.doc_ids.tolist(), res.scores.tolist(), evidence, ids, scores)


def standard_search(index: CorpusIndex, q: Embeddings, k: int) -> list[Retrieved]:
    """Standard RAG for every query in ``q``."""
    hits = index.standard.search(q.standard[:, None, :], k)
    return [Retrieved("standard", hits.ids[i, 0].tolist(), hits.scores[i, 0].tolist()) for i in range(len(q))]


def head_hits(index: CorpusIndex, q: Embeddings, c: int, vote: str | None = None) -> Hits:
    """Top-``c`` per head space for every query: ids/scores [q, h, c], searched for ``vote`` (HNSW:
    to that vote's calibrated final-list accuracy)."""
    return index.heads.search(q.heads, c, vote=vote)


def split_hits(index: CorpusIndex, q: Embeddings, c: int, vote: str | None = None) -> Hits:
    """Top-``c`` per split piece for every query: ids/scores [q, h, c], searched for ``vote``."""
    return index.split.search(q.split(index.n_heads), c, vote=vote)


def mrag_search(index: CorpusIndex, q: Embeddings, k: int, c: int = DEFAULT_C, variant: str = "importance",
                hits: Hits | None = None, with_evidence: bool = True) -> list[Retrieved]:
    """MRAG for every query in ``q`` (``hits`` may be passed to reuse a search made for a vote with the
    same ``index.heads.search_key`` as ``variant``)."""
    hits = hits or head_hits(index, q, c, variant)
    imp = index.head_importance.score
    return [
        _vote_from_hits(hits.ids[i, :, :c], hits.scores[i, :, :c], imp, variant, index.metric, k, "mrag", with_evidence)
        for i in range(len(q))
    ]


def split_search(index: CorpusIndex, q: Embeddings, k: int, c: int = DEFAULT_C, variant: str = "decay",
                 hits: Hits | None = None, with_evidence: bool = True) -> list[Retrieved]:
    """Split RAG for every query (authors' default vote 2^-p; ``importance`` gives s_i * 2^-p)."""
    hits = hits or split_hits(index, q, c, variant)
    imp = index.split_importance.score
    return [
        _vote_from_hits(hits.ids[i, :, :c], hits.scores[i, :, :c], imp, variant, index.metric, k, "split",
                        with_evidence)
        for i in range(len(q))
    ]


def _fuse(lists: list[list[int]], k: int, strategy: str) -> Retrieved:
    fused = reciprocal_rank_fusion(lists)[:k]
    return Retrieved(strategy, [int(d) for d, _ in fused], [s for _, s in fused], sub_rankings=lists)


def fusion_search(index: CorpusIndex, subqueries: Embeddings, k: int, c: int = DEFAULT_C) -> Retrieved:
    """Fusion RAG for ONE query given its sub-query embeddings: standard search per sub-query, RRF."""
    if len(subqueries) == 0:
        return Retrieved("fusion", [], [])
    hits = index.standard.search(subqueries.standard[:, None, :], c)
    return _fuse([hits.ids[j, 0].tolist() for j in range(len(subqueries))], k, "fusion")


def fusion_mrag_search(index: CorpusIndex, subqueries: Embeddings, k: int, c: int = DEFAULT_C,
                       variant: str = "importance") -> Retrieved:
    """Fusion MRAG for ONE query: MRAG per sub-query (top ``c``), RRF over the lists."""
    if len(subqueries) == 0:
        return Retrieved("fusion-mrag", [], [])
    per_sub = mrag_search(index, subqueries, c, c, variant, with_evidence=False)
    return _fuse([r.doc_ids for r in per_sub], k, "fusion-mrag")
