"""Category Success Ratio (MRAG paper): share of ground-truth categories present in the results.

    CSR(R, G) = |cat(R) ∩ cat(G)| / |cat(G)|

A retrieved document counts when its category is one of G's categories, each category once.
"""

from __future__ import annotations

from typing import Hashable, Iterable


def category_success_ratio(retrieved_labels: Iterable[Hashable], relevant_labels: Iterable[Hashable]) -> float:
    """``|set(retrieved_labels) ∩ set(relevant_labels)| / |set(relevant_labels)|``; 0.0 when G is empty."""
    g = set(relevant_labels)
    if not g:
        return 0.0
    return len(g & set(retrieved_labels)) / len(g)
