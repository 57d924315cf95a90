"""Random standard + per-head embeddings for engine tests (no model needed)."""

from __future__ import annotations

import numpy as np

from mrag_core.extraction import Embeddings


def random_embeddings(rng: np.random.Generator, n: int, dim: int, heads: int, head_dim: int) -> Embeddings:
    """``n`` texts: standard vectors [n, dim] and head vectors [n, heads, head_dim], standard normal, float32."""
    return Embeddings(rng.normal(size=(n, dim)).astype(np.float32),
                      rng.normal(size=(n, heads, head_dim)).astype(np.float32))
