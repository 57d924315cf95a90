"""Retrieval Success Ratio (MRAG paper): share of ground-truth documents that were retrieved.

    RSR(R, G) = |R ∩ G| / |G|

:func:`retrieval_success_prefix` gives the same ratio for every prefix ``R_k = ranking[:k]``, k = 1..k_max, in one
pass (an evaluation scores all k at once).

``G`` holds one document per aspect. For topic-level datasets (legal / accident), ``G`` is a list
of groups (one per aspect, each the topic's documents) and an aspect counts when any of its
documents is retrieved: RSR = (#groups hit) / (#groups).
"""

from __future__ import annotations

from typing import Hashable, Iterable, Sequence

import numpy as np


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


def retrieval_success_prefix(ranking: Sequence[Hashable], relevant: Iterable[Hashable], k_max: int) -> np.ndarray:
    """``[RSR(ranking[:k], relevant) for k in 1..k_max]`` in O(k_max): the count of distinct relevant items among
    the first k, over ``|G|`` (0.0 for an empty ``G``). A ranking shorter than ``k_max`` keeps its last value."""
    g = set(relevant)
    hit = np.zeros(k_max)
    found: set[Hashable] = set()
    for j, d in enumerate(ranking[:k_max]):
        if d in g and d not in found:
            found.add(d)
            hit[j] = 1.0
    return np.cumsum(hit) / len(g) if g else hit
