"""LLM-assisted retrieval strategies: Multi-Query RAG, HyDE and intent-aware hypothetical queries.

Each strategy has an LLM *family* (the expansion it needs) and a search mode:

* ``multi-query`` / ``multi-query-mrag``: the LLM writes ``n_rewrites`` (3-5 recommended) diverse
  rewrites of the question (:func:`~services.expansion.rewrite_queries`); every rewrite is searched.
* ``hyde`` / ``hyde-mrag``: the LLM writes one hypothetical answer passage
  (:func:`~services.expansion.hypothetical_passage`); the passage is searched and, with
  ``hyde_with_query`` (default True: one invented passage can drift off the question), so is
  the original query.
* ``intent`` / ``intent-mrag``: the LLM hypothesises ``n_answers`` plausible answers, each
  decomposed into short intent-specific statements (MuISQA,
  :func:`~services.expansion.intent_statements`); every statement is searched.

Search mode: plain names search each text in the standard space (depth ``c``) like Fusion RAG;
``-mrag`` names run MRAG voting per text (per-head depth ``c``, top ``c``) like Fusion MRAG.
The lists are merged by Reciprocal Rank Fusion, ``score(d) = sum_lists 1 / (60 + rank(d))``
with rank from 1 (:mod:`mrag_core.rrf`), and the first ``k`` are returned.

The strategies take their expansion texts as data (their embeddings, :func:`llm_search`): asking the LLM for
them is the services' :mod:`services.llm_strategies` (``expand``, ``expand_many``, ``ExpansionOutcome``), whose
records :func:`cost_summary` totals.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from mrag_core.settings import DEFAULT_C
from mrag_core.strategy_registry import STRATEGIES

if TYPE_CHECKING:  # pragma: no cover
    from mrag_core.corpus_index import CorpusIndex
    from mrag_core.extraction import Embeddings
    from mrag_core.strategies import Retrieved

# Light at import (the options, the names, the costs): the search code is imported when :func:`llm_search` runs.

__all__ = [
    "LLM_FAMILIES",
    "LLM_STRATEGIES",
    "LLM_STRATEGY_LABELS",
    "FAMILY_LABELS",
    "LLMOptions",
    "TextBatch",
    "cost_summary",
    "families_for",
    "family_of",
    "is_llm_strategy",
    "llm_search",
    "uses_query",
]

LLM_FAMILIES = ("multi-query", "hyde", "intent")

# strategy name -> (LLM family, MRAG voting per sub-query), from the registry
LLM_STRATEGIES: dict[str, tuple[str, bool]] = {s.id: (s.source, s.kind == "fusion-mrag")
                                               for s in STRATEGIES.values() if s.needs_llm}

LLM_STRATEGY_LABELS: dict[str, str] = {s: STRATEGIES[s].label for s in LLM_STRATEGIES}

FAMILY_LABELS: dict[str, str] = {
    "multi-query": "Multi-query rewrites",
    "hyde": "HyDE passage",
    "intent": "Intent statements",
}


@dataclass(frozen=True)
class LLMOptions:
    """Settings of the LLM expansions (part of a run's configuration).

    ``n_rewrites``: rewrites asked for by Multi-Query (1..10); ``n_answers``: plausible answers
    asked for by the intent strategy (1..8); ``hyde_with_query``: HyDE fuses the passage's list
    with the original query's list (RRF of two lists) instead of searching the passage alone.
    """

    n_rewrites: int = 4
    n_answers: int = 3
    hyde_with_query: bool = True

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (stored in a run's ``config["llm"]``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "LLMOptions":
        """Inverse of :meth:`to_dict`; missing keys take the defaults, unknown keys are ignored."""
        data = data or {}
        d = cls()
        return cls(n_rewrites=int(data.get("n_rewrites", d.n_rewrites)),
                   n_answers=int(data.get("n_answers", d.n_answers)),
                   hyde_with_query=bool(data.get("hyde_with_query", d.hyde_with_query)))


def is_llm_strategy(name: str) -> bool:
    """Whether ``name`` needs LLM expansions."""
    return name in LLM_STRATEGIES


def family_of(name: str) -> str | None:
    """The LLM family of a strategy name (``None`` for strategies without an LLM)."""
    entry = LLM_STRATEGIES.get(name)
    return entry[0] if entry else None


def families_for(strategies: Iterable[str]) -> list[str]:
    """The LLM families the ``strategies`` need, in :data:`LLM_FAMILIES` order."""
    wanted = {family_of(s) for s in strategies}
    return [f for f in LLM_FAMILIES if f in wanted]


def uses_query(family: str, options: LLMOptions) -> bool:
    """Whether the original query's own list joins the fusion (HyDE with ``hyde_with_query``)."""
    return family == "hyde" and options.hyde_with_query


def cost_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals over expansion records (:meth:`services.llm_strategies.ExpansionOutcome.record` dicts).

    ``prompt_tokens`` / ``completion_tokens`` / ``tokens``: what the expansions cost (cache hits
    counted at their original cost); ``spent_tokens``: tokens sent now (cache misses only);
    ``latency_s``: LLM seconds now; ``requests``: expansions asked now (cache misses, failed ones included, one
    stopped in a retry wait by another request's failure too; not those left unsent after the endpoint failed);
    ``cached`` / ``failed``: counts; ``tokens_per_query`` = tokens / expansions.
    """
    n = prompt = completion = spent = requests = cached = failed = 0
    latency = 0.0
    for r in records:
        n += 1
        p, c = int(r.get("prompt_tokens", 0)), int(r.get("completion_tokens", 0))
        prompt += p
        completion += c
        latency += float(r.get("latency_s", 0.0))
        if r.get("cached"):
            cached += 1
        else:
            spent += p + c
            requests += 0 if r.get("not_sent") else 1
        if r.get("error") is not None:
            failed += 1
    return {"expansions": n, "prompt_tokens": prompt, "completion_tokens": completion, "tokens": prompt + completion,
            "spent_tokens": spent, "latency_s": latency, "requests": requests, "cached": cached, "failed": failed,
            "tokens_per_query": (prompt + completion) / n if n else 0.0}


# --------------------------------------------------------------------------- search


def _concat(a: Embeddings, b: Embeddings) -> Embeddings:
    from mrag_core.extraction import Embeddings

    return Embeddings(np.concatenate([a.standard, b.standard]), np.concatenate([a.heads, b.heads]))


def llm_search(
    index: CorpusIndex,
    strategy: str,
    query: Embeddings,
    texts: Embeddings,
    k: int,
    c: int = DEFAULT_C,
    variant: str = "importance",
    options: LLMOptions = LLMOptions(),
) -> Retrieved:
    """One LLM strategy for ONE query: ``query`` [1] and its expansion texts' embeddings ``texts`` [m].

    Every text (plus the query for HyDE with ``hyde_with_query``) is searched - standard space to
    depth ``c``, or MRAG per text (top ``c``) for ``-mrag`` names - and the lists are fused by RRF
    (1/(60 + rank)); the first ``k`` are returned, ``sub_rankings`` holding the per-text lists
    (the query's first when it takes part). No text (a failed expansion) gives an empty list.
    """
    from mrag_core.strategies import Retrieved, fusion_mrag_search, fusion_search

    if strategy not in LLM_STRATEGIES:
        raise ValueError(f"unknown LLM strategy {strategy!r}: use {', '.join(LLM_STRATEGIES)}")
    family, mrag = LLM_STRATEGIES[strategy]
    if len(texts) == 0:
        return Retrieved(strategy, [], [])
    subs = _concat(query.take([0]), texts) if uses_query(family, options) else texts
    res = fusion_mrag_search(index, subs, k, c, variant) if mrag else fusion_search(index, subs, k, c)
    return replace(res, strategy=strategy)


@dataclass
class TextBatch:
    """Texts of several owners (e.g. ``(family, query id)``) laid out as rows of one embedding batch."""

    texts: list[str] = field(default_factory=list)
    rows: dict[Any, tuple[int, ...]] = field(default_factory=dict)

    def add(self, key: Any, texts: Sequence[str]) -> tuple[int, ...]:
        """Append ``texts`` as ``key``'s rows; returns the row numbers."""
        rows = tuple(range(len(self.texts), len(self.texts) + len(texts)))
        self.texts.extend(texts)
        self.rows[key] = rows
        return rows
