"""Retrieval metrics, one module per metric (inputs are plain sequences of document ids / labels)."""

from mrag_core.metrics.category_success import category_success_prefix, category_success_ratio
from mrag_core.metrics.mrr import reciprocal_rank
from mrag_core.metrics.ndcg import ndcg_at_k
from mrag_core.metrics.recall import recall_at_k
from mrag_core.metrics.retrieval_success import retrieval_success_prefix, retrieval_success_ratio
from mrag_core.metrics.weighted import weighted_success_ratio

__all__ = [
    "retrieval_success_ratio", "category_success_ratio", "weighted_success_ratio",
    "retrieval_success_prefix", "category_success_prefix",
    "recall_at_k", "reciprocal_rank", "ndcg_at_k",
]
