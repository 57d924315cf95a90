"""The one registry of retrieval strategies: every strategy's id, label, aliases, whether it needs an LLM, how it is
searched (``kind``, ``variant``, ``source``), and one uniform search adapter (:meth:`Strategy.search`).

Everything that names strategies reads it: ``bench`` and ``eval`` (their ``--strategies`` lists and help), the
evaluation (:func:`mrag_core.evaluation.evaluate`), Compare, Evaluation Runs, the Reader, the exports and the chart
colours. A new strategy is one :class:`Strategy` here (and, if it is a new ``kind``, its branch in
:meth:`Strategy.search` and in the evaluation).

Names: :func:`resolve` accepts an id or an alias (``recommended`` is :data:`RECOMMENDED`, the sentence round-robin of
:mod:`mrag_core.sentence_round_robin`) and refuses anything else with the list of valid names.

Kinds:

* ``standard``: top-k in the standard space;
* ``mrag`` / ``split``: the vote over the head spaces / the standard vector's pieces (``variant``: the vote);
* ``fusion`` / ``fusion-mrag``: several texts searched (standard space / MRAG vote), fused by RRF; ``source`` says
  which texts: the queries' stored sub-queries (``fusion``) or an LLM family's expansions (``multi-query``,
  ``hyde``, ``intent``: the LLM-assisted strategies, :mod:`mrag_core.llm_strategies`);
* ``parts``: the query's own sentences, each searched in two views, taken round-robin and fused
  (:mod:`mrag_core.sentence_round_robin`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable, Sequence

from mrag_core.settings import DEFAULT_C

if TYPE_CHECKING:  # pragma: no cover
    from mrag_core.corpus_index import CorpusIndex
    from mrag_core.extraction import Embeddings
    from mrag_core.llm_strategies import LLMOptions
    from mrag_core.strategies import Retrieved

# The registry is light (no torch, no search code at import): the CLI builds its parsers and the store-only commands
# run without loading the engine. :meth:`Strategy.search` imports the search code when it first searches.

__all__ = [
    "KINDS",
    "PRESELECTED",
    "RECOMMENDED",
    "STRATEGIES",
    "QueryInputs",
    "Strategy",
    "UnknownStrategyError",
    "canonical",
    "label_of",
    "names",
    "parse_strategies",
    "resolve",
    "resolve_all",
]

KINDS = ("standard", "mrag", "split", "fusion", "fusion-mrag", "parts")
FUSION_KINDS = ("fusion", "fusion-mrag")
PREFIX_KINDS = ("standard", "mrag", "split", "parts")
"""Kinds that rank once to depth ``k_max`` and are scored on its prefixes (fusion kinds build one list per k)."""


@dataclass(frozen=True)
class QueryInputs:
    """What one query brings to a search: its embedding ``query`` [1]; ``subqueries`` [m] (Fusion's stored
    sub-queries); ``parts`` [p] and ``part_texts`` (its sentences, :func:`mrag_core.sentence_round_robin.query_parts`);
    ``expansions`` [e] (the texts of the LLM family the strategy needs) and the LLM ``options``."""

    query: Embeddings
    subqueries: Embeddings | None = None
    parts: Embeddings | None = None
    part_texts: Sequence[str] = ()
    expansions: Embeddings | None = None
    options: "LLMOptions | None" = None


@dataclass(frozen=True)
class Strategy:
    """One retrieval strategy (see the module docstring for ``kind`` and ``source``). ``variant`` is the vote of
    the ``mrag`` / ``split`` / ``fusion-mrag`` / ``parts`` kinds; ``compare``: offered in Compare's own (non-LLM)
    list; ``authors_name``: the key of the MRAG authors' result files (``""``: the id)."""

    id: str
    label: str
    kind: str
    variant: str = "importance"
    source: str = "fusion"
    aliases: tuple[str, ...] = ()
    compare: bool = False
    authors_name: str = ""

    @property
    def name(self) -> str:
        """The id (the field older code read as ``name``)."""
        return self.id

    @property
    def needs_llm(self) -> bool:
        """Whether the strategy needs LLM expansions (a fusion kind whose texts an LLM writes)."""
        return self.kind in FUSION_KINDS and self.source != "fusion"

    llm = needs_llm

    @property
    def fuses(self) -> bool:
        """Whether it fuses several texts' lists, one list per k (Fusion, Fusion MRAG, the LLM-assisted ones)."""
        return self.kind in FUSION_KINDS

    @property
    def votes(self) -> bool:
        """Whether its result carries per-head evidence (MRAG votes): ``mrag``, ``fusion-mrag`` (per text)."""
        return self.kind in ("mrag", "fusion-mrag")

    def search(self, index: "CorpusIndex", inputs: QueryInputs, k: int, c: int = DEFAULT_C,
               variant: str | None = None) -> Retrieved:
        """This strategy for ONE query: the top ``k``. Voted views search each space to depth ``c``; fusion kinds
        search each text to depth ``k`` (Fusion MRAG: per-head depth ``k``, its top ``k``), as the evaluation scores
        them at ``k``. ``variant`` overrides the vote of ``mrag`` / ``fusion-mrag`` / ``parts`` (Split keeps its
        own). A missing input the kind needs raises ``ValueError``."""
        from mrag_core import sentence_round_robin as srr
        from mrag_core.strategies import fusion_mrag_search, fusion_search, mrag_search, split_search, standard_search

        vote = variant or self.variant
        if self.kind == "standard":
            res = standard_search(index, inputs.query, k)[0]
        elif self.kind == "mrag":
            res = mrag_search(index, inputs.query, k, c, vote)[0]
        elif self.kind == "split":
            res = split_search(index, inputs.query, k, c, self.variant)[0]
        elif self.kind == "parts":
            if inputs.parts is None:
                raise ValueError(f"{self.id} needs the query's parts (its sentences) embedded")
            res = srr.sentence_round_robin(index, inputs.parts, k, c, part_texts=inputs.part_texts, variant=vote)
        elif self.needs_llm:
            from mrag_core.llm_strategies import LLMOptions, llm_search

            if inputs.expansions is None:
                raise ValueError(f"{self.id} needs the {self.source} expansion texts embedded")
            return llm_search(index, self.id, inputs.query, inputs.expansions, k, k, vote,
                              inputs.options or LLMOptions())
        else:
            if inputs.subqueries is None:
                raise ValueError(f"{self.id} needs the sub-queries embedded")
            res = (fusion_search(index, inputs.subqueries, k, c=k) if self.kind == "fusion"
                   else fusion_mrag_search(index, inputs.subqueries, k, c=k, variant=vote))
        return replace(res, strategy=self.id)


RECOMMENDED = "sentence-round-robin"
"""The recommended offline strategy (no LLM, the default model): sentence round-robin
(:mod:`mrag_core.sentence_round_robin`), alias ``recommended``."""
RECOMMENDED_LABEL = "Sentence round-robin (Standard + MRAG per sentence)"
RECOMMENDED_ALIAS = "recommended"

_ALL = (
    Strategy("standard", "Standard RAG", "standard", compare=True, authors_name="standard-rag"),
    Strategy("mrag", "MRAG", "mrag", "importance", compare=True),
    Strategy("mrag-decay", "MRAG (vote 2^-rank)", "mrag", "decay", authors_name="mrag-strategy-decay"),
    Strategy("mrag-distance", "MRAG (distance vote)", "mrag", "distance", authors_name="mrag-strategy-distance"),
    Strategy("split", "Split RAG", "split", "decay", compare=True, authors_name="split-rag"),
    Strategy("split-weighted", "Split RAG (importance vote)", "split", "importance",
             authors_name="split-rag-strategy-weighted"),
    Strategy("fusion", "Fusion RAG", "fusion", compare=True, authors_name="fusion-rag"),
    Strategy("fusion-mrag", "Fusion MRAG", "fusion-mrag", "importance", compare=True),
    Strategy(RECOMMENDED, RECOMMENDED_LABEL, "parts", "importance", aliases=(RECOMMENDED_ALIAS,), compare=True),
    # LLM-assisted (mrag_core.llm_strategies): Multi-Query RAG, HyDE, intent-aware hypothetical queries
    Strategy("multi-query", "Multi-Query RAG", "fusion", source="multi-query"),
    Strategy("multi-query-mrag", "Multi-Query MRAG", "fusion-mrag", "importance", "multi-query"),
    Strategy("hyde", "HyDE", "fusion", source="hyde"),
    Strategy("hyde-mrag", "HyDE + MRAG", "fusion-mrag", "importance", "hyde"),
    Strategy("intent", "Intent queries", "fusion", source="intent"),
    Strategy("intent-mrag", "Intent queries + MRAG", "fusion-mrag", "importance", "intent"),
)

STRATEGIES: dict[str, Strategy] = {s.id: s for s in _ALL}
"""Every strategy by id, in display order (Standard, MRAG and its votes, Split, Fusion, the recommended one, the
LLM-assisted ones)."""

_ALIASES: dict[str, str] = {a: s.id for s in _ALL for a in s.aliases}

PRESELECTED = ("standard", "mrag", RECOMMENDED)
"""What Compare shows side by side before the user picks: Standard, MRAG and the recommended strategy."""


class UnknownStrategyError(ValueError):
    """A name that is neither a strategy id nor an alias (the message lists the valid names)."""


def names() -> list[str]:
    """Every accepted name: the ids, then the aliases."""
    return [*STRATEGIES, *_ALIASES]


def _valid() -> str:
    aliases = ", ".join(f"{a} = {i}" for a, i in _ALIASES.items())
    return f"{', '.join(STRATEGIES)} (aliases: {aliases})"


def resolve(name: str) -> Strategy:
    """The strategy of an id or an alias (spaces around it and case ignored); :class:`UnknownStrategyError`
    naming the valid names otherwise."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in STRATEGIES:
        raise UnknownStrategyError(f"unknown strategy {name!r}: use one of {_valid()}")
    return STRATEGIES[key]


def canonical(name: str) -> str:
    """The id of an id or an alias (:func:`resolve`)."""
    return resolve(name).id


def label_of(name: str) -> str:
    """The label of an id or an alias; any other name is returned as it is (a stored run may hold one)."""
    try:
        return resolve(name).label
    except UnknownStrategyError:
        return str(name)


def resolve_all(names_: Iterable[str]) -> list[Strategy]:
    """:func:`resolve` of every name, in order (repeats kept); one :class:`UnknownStrategyError` naming every
    unknown one."""
    given = [str(s) for s in names_]
    bad = [s for s in given if s.strip().lower() not in STRATEGIES and s.strip().lower() not in _ALIASES]
    if bad:
        raise UnknownStrategyError(f"unknown strategies {bad}: use {_valid()}")
    return [resolve(s) for s in given]


def parse_strategies(value: str | Iterable[str], *, keep_names: bool = True) -> list[str]:
    """A comma list (or a sequence) of strategy names, each checked by :func:`resolve`; repeats dropped, order
    kept. ``keep_names``: the names as given (``recommended`` stays ``recommended``, so results are keyed as the
    user asked), else their ids. Empty: :class:`UnknownStrategyError`."""
    items = value.split(",") if isinstance(value, str) else list(value)
    given = [str(s).strip() for s in items if str(s).strip()]
    resolve_all(given)
    if not given:
        raise UnknownStrategyError(f"no strategy given: use {_valid()}")
    out = [s.lower() if keep_names else canonical(s) for s in given]
    return list(dict.fromkeys(out))
