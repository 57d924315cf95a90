"""Reciprocal rank: ``1 / rank`` of the first relevant result (rank from 1), 0 when none within ``k``.

MRR is the mean of this value over queries.
"""

from __future__ import annotations

from typing import Hashable, Sequence


def reciprocal_rank(ranking: Sequence[Hashable], relevant: Sequence[Hashable], k: int | None = None) -> float:
    """``1 / rank`` of the first relevant document in ``ranking[:k]``; 0.0 if there is none."""
    rel = set(relevant)
    for rank, doc in enumerate(ranking if k is None else ranking[:k], start=1):
        if doc in rel:
            return 1.0 / rank
    return 0.0
