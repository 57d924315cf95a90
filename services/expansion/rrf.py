"""Reciprocal Rank Fusion for expansion strategies: re-exported from :mod:`mrag_core.rrf`."""

from mrag_core.rrf import reciprocal_rank_fusion

__all__ = ["reciprocal_rank_fusion"]
