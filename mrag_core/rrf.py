"""Reciprocal Rank Fusion (Cormack, Clarke & Buettcher, 2009).

``score(d) = sum over rankings r containing d of 1 / (k + rank_r(d))`` with
ranks starting at 1 and ``k = 60`` by default. Documents absent from a ranking
contribute nothing for it. If a ranking lists a document more than once, only
its first (best) position counts.

Ties (equal scores) are broken by *first appearance*: the order in which
documents are first met when reading ranking 1 top to bottom, then ranking 2,
and so on. The result is therefore fully deterministic.
"""

from __future__ import annotations

from typing import Hashable, Sequence, TypeVar

__all__ = ["reciprocal_rank_fusion"]

D = TypeVar("D", bound=Hashable)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[D]], k: int = 60) -> list[tuple[D, float]]:
    """Fuse ``rankings`` (best first) into ``[(doc, score)]`` sorted by score descending.

    Raises ``ValueError`` for ``k < 0``. Empty input gives ``[]``.
    """
    if k < 0:
        raise ValueError(f"The RRF constant k must be >= 0, got {k}.")
    scores: dict[D, float] = {}
    first_seen: dict[D, int] = {}
    for ranking in rankings:
        seen_here: set[D] = set()
        for rank, doc in enumerate(ranking, start=1):
            if doc in seen_here:
                continue
            seen_here.add(doc)
            if doc not in first_seen:
                first_seen[doc] = len(first_seen)
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], first_seen[item[0]]))
