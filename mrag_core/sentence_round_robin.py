"""Sentence round-robin: the recommended offline strategy (no LLM, the default MiniLM).

A multi-aspect query (a story) puts its aspects in different sentences, and embedded whole it is one blurred
vector (and MiniLM reads only its first 256 tokens). So the query is cut into parts, each part retrieves on
its own, in two views, and every part's best documents are taken in turn:

1. Parts ``p = 1..m``: the query's sentences (:func:`mrag_core.query_parts.split_sentences`: abbreviations kept,
   long sentences cut, short fragments joined, repeats dropped); a query with no sentence is one part. All
   parts are embedded in one batch.
2. Per part, two lists of depth ``c`` (default 32):
   * Standard ``S_p``: the top ``c`` documents by cosine in the standard space;
   * MRAG ``M_p``: top ``c`` per head space, the importance vote ``s_i * 2^-r`` (:mod:`mrag_core.voting`), top ``c``.
3. Per view ``V`` (Standard, MRAG), a round-robin over the parts: documents ordered by their best rank in any of
   the view's lists, ``b_V(d) = min_p rank_{V_p}(d)`` (0-based), ties by the RRF sum over the view's lists
   ``sum_p 1 / (60 + rank_{V_p}(d) + 1)`` (larger first), then by first appearance (parts in order, each list
   top to bottom). So every part's first document comes before any part's second one.
4. The two view rankings are fused by RRF: ``score(d) = 1 / (60 + pos_S(d)) + 1 / (60 + pos_M(d))`` with
   ``pos`` the 1-based position in the view's ranking (a view without ``d`` adds nothing); ties by first
   appearance, the Standard view read first (:func:`mrag_core.rrf.reciprocal_rank_fusion`); the top ``k`` win.

Parameters: none chosen per data set; ``c`` = 32 and the RRF constant 60 are the project's defaults. Chosen on
the tune half of the v1 queries (``bench/strategy_search.py``; figures in ``bench/README.md``).

Evidence (for "why was it found"): :class:`Retrieved` ``.evidence[d]`` holds one :class:`SpaceHit` per view
(space 0 = Standard view, 1 = MRAG view; rank = 0-based position in the view's ranking; contribution = its
RRF term), ``.sub_rankings`` the parts' lists (Standard then MRAG per part), and
:class:`PartsRetrieved` adds ``parts`` (the part texts) and ``part_evidence[d]``: every part list that holds
``d`` (:class:`PartHit`: part, view, rank, RRF term, and for the MRAG view the heads that voted for ``d`` in
that part, as ``SpaceHit`` of the vote).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from mrag_core.backends import Hits
from mrag_core.corpus_index import CorpusIndex
from mrag_core.extraction import Embeddings
from mrag_core.query_parts import split_sentences
from mrag_core.rrf import reciprocal_rank_fusion
from mrag_core.settings import DEFAULT_C
from mrag_core.strategies import Retrieved, SpaceHit
from mrag_core.strategy_registry import RECOMMENDED, RECOMMENDED_ALIAS, RECOMMENDED_LABEL
from mrag_core.voting import RRF_K, vote_hits

__all__ = [
    "ALIAS",
    "LABEL",
    "STRATEGY_ID",
    "VIEWS",
    "PartHit",
    "PartsRetrieved",
    "query_part_rows",
    "query_parts",
    "round_robin",
    "search_parts",
    "sentence_round_robin",
    "sentence_round_robin_many",
]

STRATEGY_ID, LABEL, ALIAS = RECOMMENDED, RECOMMENDED_LABEL, RECOMMENDED_ALIAS  # named once, in the registry
VIEWS = ("standard", "mrag")
"""The two views; their index is the ``space`` of the view evidence."""


@dataclass(frozen=True)
class PartHit:
    """One part's list holding a document: ``part`` (index into the parts), ``view`` (``standard`` | ``mrag``),
    0-based ``rank`` in that list, ``contribution`` = 1 / (60 + rank + 1) to the view's tie-break sum, and for
    the MRAG view the head votes behind it (``SpaceHit``: head, rank in the head's list, vote)."""

    part: int
    view: str
    rank: int
    contribution: float
    heads: tuple[SpaceHit, ...] = ()


@dataclass
class PartsRetrieved(Retrieved):
    """:class:`Retrieved` plus the part texts and the per-part evidence of every returned document."""

    parts: list[str] = field(default_factory=list)
    part_evidence: dict[int, list[PartHit]] = field(default_factory=dict)


def query_parts(text: str) -> list[str]:
    """The parts of a query: its sentences, or the stripped text as one part when it has none; ``[]`` when blank."""
    parts = split_sentences(text)
    if parts:
        return parts
    stripped = " ".join((text or "").split())
    return [stripped] if stripped else []


def query_part_rows(texts: Sequence[str]) -> tuple[list[str], list[tuple[int, ...]]]:
    """The parts of every query in ``texts`` laid out for one embedding batch: (all parts, each query's rows)."""
    flat: list[str] = []
    rows: list[tuple[int, ...]] = []
    for text in texts:
        parts = query_parts(text)
        rows.append(tuple(range(len(flat), len(flat) + len(parts))))
        flat.extend(parts)
    return flat, rows


def round_robin(lists: Sequence[Sequence[int]], rrf_k: int = RRF_K) -> list[int]:
    """Documents of ``lists`` by their best 0-based rank in any list; ties by the RRF sum (``rrf_k``) over the
    lists, larger first, then by first appearance (step 3 of the module docstring)."""
    fused = reciprocal_rank_fusion([list(x) for x in lists], rrf_k)  # sorted by (-sum, first appearance)
    tie = {d: i for i, (d, _) in enumerate(fused)}
    best: dict[int, int] = {}
    for lst in lists:
        for r, d in enumerate(lst):
            if r < best.get(d, r + 1):
                best[d] = r
    return sorted(best, key=lambda d: (best[d], tie[d]))


def search_parts(index: CorpusIndex, parts: Embeddings, c: int, variant: str = "importance") -> tuple[Hits, Hits]:
    """Standard hits [m, 1, c] and head hits [m, h, c] of every part, one search each (any number of queries'
    parts at once)."""
    std = index.standard.search(parts.standard[:, None, :], c)
    heads = index.heads.search(parts.heads, c, vote=variant)
    return std, heads


def _fuse(index: CorpusIndex, std: Hits, heads: Hits, rows: Sequence[int], k: int, c: int, variant: str,
          texts: Sequence[str], with_evidence: bool) -> PartsRetrieved:
    """Steps 2-4 for one query whose parts are ``rows`` of the part hits."""
    if not len(rows):
        return PartsRetrieved(STRATEGY_ID, [], [], parts=list(texts))
    imp = index.head_importance.score
    s_lists: list[list[int]] = []
    m_lists: list[list[int]] = []
    head_votes: list[dict[int, list[tuple[int, int, float]]]] = []
    for r in rows:
        s_lists.append([int(d) for d in std.ids[r, 0, :c] if d >= 0])
        vote = vote_hits(heads.ids[r, :, :c], heads.scores[r, :, :c], imp, variant, c, index.metric,
                         with_evidence=with_evidence)
        m_lists.append([int(d) for d in vote.doc_ids])
        head_votes.append(vote.evidence)
    views = (round_robin(s_lists), round_robin(m_lists))
    fused = reciprocal_rank_fusion(list(views), RRF_K)[:k]
    sub = [lst for pair in zip(s_lists, m_lists) for lst in pair]
    out = PartsRetrieved(STRATEGY_ID, [int(d) for d, _ in fused], [float(s) for _, s in fused],
                         sub_rankings=sub, parts=list(texts))
    if with_evidence:
        positions = [{d: i for i, d in enumerate(v)} for v in views]
        for d in out.doc_ids:
            out.evidence[d] = [SpaceHit(v, positions[v][d], 1.0 / (RRF_K + positions[v][d] + 1))
                               for v in range(len(VIEWS)) if d in positions[v]]
            hits: list[PartHit] = []
            for p in range(len(rows)):
                for view, lst in (("standard", s_lists[p]), ("mrag", m_lists[p])):
                    if d in lst:
                        rank = lst.index(d)
                        voters = tuple(SpaceHit(s, q, w) for s, q, w in head_votes[p].get(d, [])) \
                            if view == "mrag" else ()
                        hits.append(PartHit(p, view, rank, 1.0 / (RRF_K + rank + 1), voters))
            out.part_evidence[d] = hits
    return out


def sentence_round_robin(index: CorpusIndex, parts: Embeddings, k: int, c: int = DEFAULT_C, *,
                         part_texts: Sequence[str] = (), variant: str = "importance",
                         with_evidence: bool = True) -> PartsRetrieved:
    """Sentence round-robin for ONE query given its parts' embeddings (rows in the order of
    :func:`query_parts`); ``part_texts`` are kept on the result for display. No part: an empty result."""
    if len(parts) == 0:
        return PartsRetrieved(STRATEGY_ID, [], [], parts=list(part_texts))
    std, heads = search_parts(index, parts, c, variant)
    return _fuse(index, std, heads, range(len(parts)), k, c, variant, part_texts, with_evidence)


def sentence_round_robin_many(index: CorpusIndex, parts: Embeddings, rows: Sequence[Sequence[int]], k: int,
                              c: int = DEFAULT_C, *, variant: str = "importance",
                              with_evidence: bool = False) -> list[PartsRetrieved]:
    """Sentence round-robin for many queries at once: ``parts`` holds every query's parts, ``rows[q]`` the rows
    of query ``q``'s parts. One search for all parts; each query fused as :func:`sentence_round_robin` does."""
    if len(parts) == 0:
        return [PartsRetrieved(STRATEGY_ID, [], []) for _ in rows]
    std, heads = search_parts(index, parts, c, variant)
    return [_fuse(index, std, heads, list(r), k, c, variant, (), with_evidence) for r in rows]
