"""Category Success Ratio (MRAG paper): share of ground-truth categories present in the results.

    CSR(R, G) = |cat(R) ∩ cat(G)| / |cat(G)|

A retrieved document counts when its category is one of G's categories, each category once.
:func:`category_success_prefix` gives it for every prefix k = 1..k_max in one pass.
"""

from __future__ import annotations

from typing import Hashable, Iterable, Sequence

import numpy as np


def category_success_ratio(retrieved_labels: Iterable[Hashable], relevant_labels: Iterable[Hashable]) -> float:
    """``|set(retrieved_labels) ∩ set(relevant_labels)| / |set(relevant_labels)|``; 0.0 when G is empty."""
    g = set(relevant_labels)
    if not g:
        return 0.0
    return len(g & set(retrieved_labels)) / len(g)


def category_success_prefix(ranked_labels: Sequence[Hashable], relevant_labels: Iterable[Hashable],
                            k_max: int) -> np.ndarray:
    """``[CSR(ranked_labels[:k], relevant_labels) for k in 1..k_max]`` in O(k_max) (0.0 when G is empty); a list
    shorter than ``k_max`` keeps its last value."""
    g = set(relevant_labels)
    new = np.zeros(k_max)
    seen: set[Hashable] = set()
    for j, cat in enumerate(ranked_labels[:k_max]):
        if cat in g and cat not in seen:
            seen.add(cat)
            new[j] = 1.0
    return np.cumsum(new) / len(g) if g else new
