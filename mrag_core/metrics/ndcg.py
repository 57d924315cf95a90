"""nDCG@k with binary relevance.

    DCG@k  = sum_{i=1..k} rel_i / log2(i + 1)
    IDCG@k = sum_{i=1..min(k, |Rel|)} 1 / log2(i + 1)
    nDCG@k = DCG@k / IDCG@k
"""

from __future__ import annotations

import math
from typing import Hashable, Sequence


def ndcg_at_k(ranking: Sequence[Hashable], relevant: Sequence[Hashable], k: int) -> float:
    """Binary-relevance nDCG of ``ranking[:k]``; 0.0 when there are no relevant documents."""
    rel = set(relevant)
    if not rel or k <= 0:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, doc in enumerate(ranking[:k], start=1) if doc in rel)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(k, len(rel)) + 1))
    return dcg / idcg
