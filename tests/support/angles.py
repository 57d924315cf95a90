"""Hand-checkable embeddings for strategy tests: every head space is 2-D and a vector is an angle.

The cosine of two unit vectors at angles a and b is cos(a - b), so rankings can be worked out by hand.
"""

from __future__ import annotations

import numpy as np

from mrag_core.extraction import Embeddings


def unit(deg: float) -> list[float]:
    """The unit vector at ``deg`` degrees."""
    r = np.deg2rad(deg)
    return [float(np.cos(r)), float(np.sin(r))]


def angle_embeddings(rows: list[list[float]]) -> Embeddings:
    """One row per text, one angle per head space; the standard vector is the heads' concatenation
    (so the split pieces equal the head spaces)."""
    heads = np.array([[unit(a) for a in row] for row in rows], dtype=np.float32)
    return Embeddings(heads.reshape(len(rows), -1).copy(), heads)
