"""Fusion RAG baseline: the LLM splits a question into ``n`` sub-queries, one per line.

Each sub-query is retrieved separately and the rankings are merged with
:func:`~mrag_core.rrf.reciprocal_rank_fusion`. The prompt is the one
used when queries are generated (:func:`~services.querygen.story_prompt.fusion_messages`),
so stored fusion sub-queries and on-the-fly ones are alike. Parsing:
:func:`~services.expansion.common.parse_list` (the list items only, cleaned,
de-duplicated, clamped to ``n``). Cache kind: ``'fusion'``.
"""

from __future__ import annotations

from services.expansion.common import Expansion, ask_and_parse, parse_list
from services.llm.cache import LLMCache
from services.llm.client import LLMClient, StopFlag
from services.querygen.story_prompt import fusion_messages

__all__ = ["KIND", "fusion_subqueries", "parse_subqueries"]

KIND = "fusion"
MAX_SUBQUERIES = 20


def parse_subqueries(text: str, n: int, *, cut_off: bool = False) -> list[str]:
    """:func:`~services.expansion.common.parse_list`: at most ``n`` sub-queries (the last one dropped when the
    answer was ``cut_off`` at the token limit); ExpansionError if none remains."""
    return parse_list(text, n, "sub-queries", cut_off=cut_off)


def fusion_subqueries(client: LLMClient, question: str, n: int, cache: LLMCache | None = None, *,
                      cancel: StopFlag | None = None) -> Expansion:
    """Ask for ``n`` (1..20) sub-queries covering ``question``; ``texts`` = the sub-queries (<= n).
    ``cancel`` ends the client's retry waits."""
    if not question.strip():
        raise ValueError("The question is empty.")
    if not 1 <= n <= MAX_SUBQUERIES:
        raise ValueError(f"The number of sub-queries must be between 1 and {MAX_SUBQUERIES}, got {n}.")
    return ask_and_parse(client, cache, KIND, fusion_messages(question, n),
                         lambda r: parse_subqueries(r.text, n, cut_off=r.cut_off), cancel=cancel)
