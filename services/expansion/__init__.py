"""LLM-assisted retrieval: query expansions (prompts + parsers) and rank fusion.

* :func:`rewrite_queries` - multi-query rewriting (cache kind ``'multi-query'``);
* :func:`hypothetical_passage` - HyDE passage (``'hyde'``);
* :func:`intent_statements` - MuISQA-style intent-aware statements (``'intent'``);
* :func:`fusion_subqueries` - Fusion RAG sub-queries (``'fusion'``);
* :func:`reciprocal_rank_fusion` - merge several rankings.

Unusable LLM answers raise :class:`ExpansionError`; transport failures raise
:class:`~services.llm.client.LLMError`.
"""

from __future__ import annotations

from mrag_core.rrf import reciprocal_rank_fusion
from services.expansion.common import Expansion, ExpansionError
from services.expansion.fusion_queries import fusion_subqueries
from services.expansion.hyde import hypothetical_passage
from services.expansion.intent import intent_statements
from services.expansion.multi_query import rewrite_queries

__all__ = [
    "Expansion",
    "ExpansionError",
    "fusion_subqueries",
    "hypothetical_passage",
    "intent_statements",
    "reciprocal_rank_fusion",
    "rewrite_queries",
]
