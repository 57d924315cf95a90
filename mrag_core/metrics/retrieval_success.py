"""Retrieval Success Ratio (MRAG paper): share of ground-truth documents that were retrieved.

    RSR(R, G) = |R ∩ G| / |G|

``G`` holds one document per aspect. For topic-level datasets (legal / accident), ``G`` is a list
of groups (one per aspect, each the topic's documents) and an aspect counts when any of its
documents is retrieved: RSR = (#groups hit) / (#groups).
"""

from __future__ import annotations

from typing import Hashable, Iterable, Sequence


def retrieval_success_ratio(retrieved: Iterable[Hashable], relevant: Sequence[Hashable]) -> float:
    """``|R ∩ G| / |G|``; 0.0 for an empty ``G``."""
    g = set(relevant)
    if not g:
        return 0.0
    return len(g & set(retrieved)) / len(g)


def grouped_success_ratio(retrieved: Iterable[Hashable], groups: Sequence[Iterable[Hashable]]) -> float:
    """Topic-level RSR: share of aspect groups with at least one retrieved document."""
    if not groups:
        return 0.0
    r = set(retrieved)
    return sum(1 for g in groups if r & set(g)) / len(groups)
