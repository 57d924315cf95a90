"""Multi-query expansion: the LLM rewrites a question into several diverse search queries.

The answer is expected one query per line; it is parsed with
:func:`~services.expansion.common.parse_list`, as Fusion sub-queries are: when
the answer numbers or bullets its queries only those items count (a chatty
``Sure! Here are three queries:`` ... ``Let me know if you need more!`` adds no
query), numbering, bullets, quotes, Markdown, preamble and polite lines are
removed, items without a letter dropped, the rest de-duplicated (normalised
text) and clamped to ``n`` queries. Cache kind: ``'multi-query'``.
"""

from __future__ import annotations

from services.expansion.common import Expansion, ask_and_parse, parse_list
from services.llm.cache import LLMCache
from services.llm.client import LLMClient, StopFlag

__all__ = ["KIND", "MAX_REWRITES", "parse_rewrites", "rewrite_messages", "rewrite_queries"]

KIND = "multi-query"
MAX_REWRITES = 10


def rewrite_messages(question: str, n: int) -> list[dict[str, str]]:
    """The rewrite prompt: ``n`` diverse search queries, one per line, nothing else."""
    prompt = (
        f"Rewrite the following question into {n} diverse search queries for a document search engine. "
        "Together they should cover the different aspects and possible meanings of the question; "
        "use different wording and keywords in each, and keep each query self-contained. "
        "Output exactly one query per line, with no numbering, no quotes and no additional text.\n\n"
        f"Question: {question.strip()}"
    )
    return [{"role": "user", "content": prompt}]


def parse_rewrites(text: str, n: int, *, cut_off: bool = False) -> list[str]:
    """:func:`~services.expansion.common.parse_list`: the queries, at most ``n`` (the last one dropped when the
    answer was ``cut_off`` at the token limit); raises :class:`~services.expansion.common.ExpansionError` if no
    query remains."""
    return parse_list(text, n, "search queries", cut_off=cut_off)


def rewrite_queries(
    client: LLMClient, question: str, n: int = 4, cache: LLMCache | None = None, *, temperature: float = 0.0,
    cancel: StopFlag | None = None,
) -> Expansion:
    """Ask for ``n`` (1..10; 3-5 recommended) rewrites of ``question``; ``texts`` = the rewrites (<= n).
    ``cancel`` ends the client's retry waits."""
    if not question.strip():
        raise ValueError("The question to rewrite is empty.")
    if not 1 <= n <= MAX_REWRITES:
        raise ValueError(f"The number of rewrites must be between 1 and {MAX_REWRITES}, got {n}.")
    return ask_and_parse(
        client, cache, KIND, rewrite_messages(question, n), lambda r: parse_rewrites(r.text, n, cut_off=r.cut_off),
        temperature=temperature, cancel=cancel,
    )
