"""Recall@k: share of relevant documents found in the first ``k`` results.

    recall@k = |R[:k] ∩ Rel| / |Rel|
"""

from __future__ import annotations

from typing import Hashable, Sequence


def recall_at_k(ranking: Sequence[Hashable], relevant: Sequence[Hashable], k: int) -> float:
    """``|ranking[:k] ∩ relevant| / |relevant|``; 0.0 for no relevant documents."""
    rel = set(relevant)
    if not rel:
        return 0.0
    return len(rel & set(ranking[:k])) / len(rel)
