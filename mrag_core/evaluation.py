"""Evaluate retrieval strategies over a query set for every k = 1..k_max.

For each query with ground-truth documents ``G`` (one per aspect) and each k, the retrieved list
``R_k`` is scored with RSR = |R_k ∩ G| / |G| and CSR = |cat(R_k) ∩ cat(G)| / |cat(G)|
(see :mod:`mrag_core.metrics`). As in the authors' evaluation:

* Standard, MRAG and Split search each space to depth ``c`` (default 32) once and score the
  prefixes ``R_k = ranking[:k]``.
* Fusion RAG / Fusion MRAG build a separate list per k: each sub-query is searched to depth k
  (MRAG: per-head depth k, top k), the lists are fused by RRF and the first k kept.
* The LLM-assisted strategies (:mod:`mrag_core.llm_strategies`: ``multi-query``, ``hyde``,
  ``intent`` and their ``-mrag`` forms) are scored the same way as Fusion RAG / Fusion MRAG, from
  pre-computed embeddings of their expansion texts (``expansions``, rows per query and family in
  ``QueryCase.expansion_rows``); HyDE with ``hyde_with_query`` adds the query's own list (searched
  to depth k as well) to the fusion.

RRF: ``score(d) = sum over lists of 1 / (60 + rank(d))``, rank from 1 (:mod:`mrag_core.rrf`).

Results can be written in the authors' layout::

    {strategy: {n_aspects: {"success_ratio": [[per query] per k], "category_success_ratio": ...}}}
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from mrag_core.backends import Hits
from mrag_core.corpus_index import CorpusIndex
from mrag_core.extraction import Embeddings
from mrag_core.metrics import (
    category_success_prefix,
    category_success_ratio,
    retrieval_success_prefix,
    retrieval_success_ratio,
    weighted_success_ratio,
)
from mrag_core.rrf import reciprocal_rank_fusion
from mrag_core.sentence_round_robin import sentence_round_robin_many
from mrag_core.settings import DEFAULT_C, DEFAULT_K_MAX, DEFAULT_W
from mrag_core.strategies import head_hits, mrag_search, split_hits, split_search, standard_search
from mrag_core.strategy_registry import PREFIX_KINDS, STRATEGIES, Strategy, UnknownStrategyError, resolve, resolve_all
from mrag_core.voting import vote_hits

StrategySpec = Strategy
"""A named strategy configuration (the registry's :class:`~mrag_core.strategy_registry.Strategy`)."""

NAMED_STRATEGIES: dict[str, Strategy] = STRATEGIES
"""Every strategy by id (:data:`mrag_core.strategy_registry.STRATEGIES`; aliases through ``resolve``)."""


class EvaluationCancelled(RuntimeError):
    """The caller's cancel event was set."""


@dataclass(frozen=True)
class QueryCase:
    """One query's ground truth: document indices (one per aspect) and, optionally, its sub-queries' rows
    (in ``subqueries``), its expansion texts' rows per LLM family (in ``expansions``) and its parts' rows (its
    sentences, in ``parts``)."""

    relevant: tuple[int, ...]
    n_aspects: int
    subquery_rows: tuple[int, ...] = ()
    expansion_rows: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    part_rows: tuple[int, ...] = ()


@dataclass
class StrategyResult:
    """Per-query, per-k results of one strategy: ``rsr`` / ``csr`` [n_queries, k_max];
    ``retrieved[q]`` is the full ranking (prefix strategies) or, for fusion, the k_max-list."""

    name: str
    rsr: np.ndarray
    csr: np.ndarray
    retrieved: list[list[int]]
    seconds: float = 0.0


@dataclass
class EvaluationResult:
    k_max: int
    cases: list[QueryCase]
    strategies: dict[str, StrategyResult] = field(default_factory=dict)


def prefix_ratios(ranking: Sequence[int], relevant: Sequence[int], labels: Sequence[str], k_max: int,
                  units: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """RSR and CSR of every prefix ``ranking[:k]``, k = 1..k_max, in O(k_max)
    (:func:`~mrag_core.metrics.retrieval_success_prefix`, :func:`~mrag_core.metrics.category_success_prefix`).

    A unit is the document itself, or its topic when ``units`` maps documents to topics (topic-level scoring: G is
    then the set of the query's topics). A ranking shorter than k_max keeps its last value.
    """
    unit = (lambda d: d) if units is None else (lambda d: units[d])
    top = ranking[:k_max]
    rsr = retrieval_success_prefix([unit(d) for d in top], [unit(d) for d in relevant], k_max)
    csr = category_success_prefix([labels[d] for d in top], [labels[d] for d in relevant], k_max)
    return rsr, csr


def set_ratios(retrieved: Sequence[int], relevant: Sequence[int], labels: Sequence[str],
               units: Sequence[int] | None = None) -> tuple[float, float]:
    """RSR and CSR of one retrieved set (``units`` as in :func:`prefix_ratios`;
    :func:`~mrag_core.metrics.retrieval_success_ratio`, :func:`~mrag_core.metrics.category_success_ratio`)."""
    unit = (lambda d: d) if units is None else (lambda d: units[d])
    return (retrieval_success_ratio([unit(d) for d in retrieved], [unit(d) for d in relevant]),
            category_success_ratio([labels[d] for d in retrieved], [labels[d] for d in relevant]))


def _mrag_lists_per_depth(ids: np.ndarray, scores: np.ndarray, imp: np.ndarray, variant: str, metric: str,
                          k_max: int) -> list[list[int]]:
    """For one (sub-)query's head hits [h, >=k_max]: the MRAG top-i list with per-head depth i, i = 1..k_max."""
    out = []
    for i in range(1, k_max + 1):
        sub_ids = ids[:, :i]  # fewer than i columns when the corpus is smaller than k_max
        out.append(vote_hits(sub_ids, scores[:, :i], imp, variant, i, metric, with_evidence=False).doc_ids.tolist())
    return out


def _standard_lists_per_depth(ids: np.ndarray, k_max: int) -> list[list[int]]:
    """For one text's standard hits [>= k_max]: its top-i list, i = 1..k_max (a prefix per depth)."""
    full = ids[:k_max].tolist()
    return [full[:i] for i in range(1, k_max + 1)]


def _fused_ratios(per_text_depth: Sequence[list[list[int]]], relevant: Sequence[int], labels: Sequence[str],
                  k_max: int, units: Sequence[int] | None) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """RSR / CSR per k of the RRF fusion of each text's depth-k list, first k kept; plus the k_max list.

    ``per_text_depth[t][i - 1]`` is text t's list searched to depth i. No text: zeros and ``[]``.
    """
    rsr, csr = np.zeros(k_max), np.zeros(k_max)
    final: list[int] = []
    for i in range(1, k_max + 1):
        fused = [int(d) for d, _ in reciprocal_rank_fusion([lists[i - 1] for lists in per_text_depth])[:i]]
        rsr[i - 1], csr[i - 1] = set_ratios(fused, relevant, labels, units)
        final = fused
    return rsr, csr, final


def evaluate(
    index: CorpusIndex,
    queries: Embeddings,
    cases: Sequence[QueryCase],
    labels: Sequence[str],
    strategies: Sequence[str] = ("standard", "mrag", "split", "fusion", "fusion-mrag"),
    *,
    k_max: int = DEFAULT_K_MAX,
    c: int = DEFAULT_C,
    subqueries: Embeddings | None = None,
    expansions: Embeddings | None = None,
    hyde_with_query: bool = True,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    units: Sequence[int] | None = None,
    parts: Embeddings | None = None,
) -> EvaluationResult:
    """Score every strategy on every query for k = 1..k_max (see module docstring).

    ``subqueries``: embeddings of the stored Fusion sub-queries (rows ``case.subquery_rows``);
    ``expansions``: embeddings of all LLM expansion texts (rows ``case.expansion_rows[family]``);
    ``parts``: embeddings of the queries' parts for the sentence round-robin (rows ``case.part_rows``).
    A query without rows for a fusion-like strategy retrieves nothing (scores 0). ``strategies`` are ids or
    aliases (:func:`mrag_core.strategy_registry.resolve`); results are keyed by the names as given.
    """
    try:
        specs = resolve_all(strategies)
    except UnknownStrategyError as exc:
        raise ValueError(str(exc)) from None
    nq = len(cases)
    result = EvaluationResult(k_max=k_max, cases=list(cases))
    depth = max(c, k_max)
    need_fusion = any(sp.kind.startswith("fusion") and not sp.llm for sp in specs)
    need_llm = any(sp.llm for sp in specs)
    if need_fusion and subqueries is None:
        raise ValueError("fusion strategies need sub-query embeddings (the queries' 'fusion' lists)")
    if need_llm and expansions is None:
        raise ValueError(f"LLM strategies {[sp.name for sp in specs if sp.llm]} need the expansion texts' embeddings")
    if any(sp.kind == "parts" for sp in specs) and parts is None:
        raise ValueError("the sentence round-robin needs the embeddings of the queries' parts (their sentences)")
    # one search per (texts, view, depth, search key): on exact backends every vote shares one;
    # calibrated HNSW searches each vote to its own final-list accuracy
    searched: dict[tuple[str, str, int, str | None], Hits] = {}

    def view_hits(texts: str, emb: Embeddings, view: str, d: int, vote: str) -> Hits:
        """Hits to depth ``d`` of the ``texts`` embeddings ``emb`` in the ``heads`` or ``split`` view, for ``vote``."""
        key = (texts, view, d, (index.heads if view == "heads" else index.split).search_key(vote))
        if key not in searched:
            searched[key] = (head_hits if view == "heads" else split_hits)(index, emb, d, vote)
        return searched[key]

    def hits_for(view: str, vote: str) -> Hits:
        """The queries' hits to ``depth`` in ``view``, for ``vote``."""
        return view_hits("queries", queries, view, depth, vote)

    def text_hits(texts: str, emb: Embeddings | None, used: list[StrategySpec]) -> tuple[Hits | None, dict[str, Hits]]:
        """Standard hits and head hits per vote to depth k_max of the texts ``emb``, only for what ``used`` needs."""
        if emb is None or not len(emb) or not used:
            return None, {}
        std = (index.standard.search(emb.standard[:, None, :], k_max) if any(sp.kind == "fusion" for sp in used)
               else None)
        heads = {sp.variant: view_hits(texts, emb, "heads", k_max, sp.variant)
                 for sp in used if sp.kind == "fusion-mrag"}
        return std, heads

    fusion_specs = [sp for sp in specs if sp.kind.startswith("fusion") and not sp.llm]
    llm_specs = [sp for sp in specs if sp.llm]
    sub_std, sub_heads = text_hits("sub-queries", subqueries, fusion_specs)
    exp_std, exp_heads = text_hits("expansions", expansions, llm_specs)
    with_query = [sp for sp in llm_specs if sp.source == "hyde" and hyde_with_query]
    q_std: Hits | None = None
    q_heads: dict[str, Hits] = {}
    if with_query:
        q_std = index.standard.search(queries.standard[:, None, :], k_max) \
            if any(sp.kind == "fusion" for sp in with_query) else None
        q_heads = {sp.variant: hits_for("heads", sp.variant) for sp in with_query if sp.kind == "fusion-mrag"}
    imp = index.head_importance.score

    def lists_per_depth(spec: StrategySpec, std: Hits | None, heads: dict[str, Hits], row: int) -> list[list[int]]:
        """One text's (row of ``std`` / ``heads[vote]``) list per depth 1..k_max for a fusion-like ``spec``."""
        if spec.kind == "fusion":
            assert std is not None
            return _standard_lists_per_depth(std.ids[row, 0], k_max)
        hits = heads[spec.variant]
        return _mrag_lists_per_depth(hits.ids[row], hits.scores[row], imp, spec.variant, index.metric, k_max)

    total = len(strategies) * nq
    done = 0
    for name, spec in zip(strategies, specs):
        t0 = time.perf_counter()
        rsr = np.zeros((nq, k_max))
        csr = np.zeros((nq, k_max))
        retrieved: list[list[int]] = []
        if spec.kind in PREFIX_KINDS:
            if spec.kind == "parts":
                assert parts is not None
                runs = sentence_round_robin_many(index, parts, [case.part_rows for case in cases], k_max, c,
                                                 variant=spec.variant)
            elif spec.kind == "standard":
                runs = standard_search(index, queries, k_max)
            elif spec.kind == "mrag":
                runs = mrag_search(index, queries, k_max, c, spec.variant, hits=hits_for("heads", spec.variant),
                                   with_evidence=False)
            else:
                runs = split_search(index, queries, k_max, c, spec.variant, hits=hits_for("split", spec.variant),
                                    with_evidence=False)
            for qi, (case, run) in enumerate(zip(cases, runs)):
                rsr[qi], csr[qi] = prefix_ratios(run.doc_ids, case.relevant, labels, k_max, units)
                retrieved.append(run.doc_ids[:k_max])
            done += nq
        else:
            std, heads = (exp_std, exp_heads) if spec.llm else (sub_std, sub_heads)
            for qi, case in enumerate(cases):
                if cancel is not None and cancel.is_set():
                    raise EvaluationCancelled(f"evaluation cancelled during {name}")
                rows = case.expansion_rows.get(spec.source, ()) if spec.llm else case.subquery_rows
                per_text = [lists_per_depth(spec, std, heads, r) for r in rows]
                if per_text and spec in with_query:
                    per_text.insert(0, lists_per_depth(spec, q_std, q_heads, qi))
                rsr[qi], csr[qi], final_list = _fused_ratios(per_text, case.relevant, labels, k_max, units)
                retrieved.append(final_list)
                done += 1
                if progress is not None and qi % 16 == 0:
                    progress(done, total)
        result.strategies[name] = StrategyResult(name, rsr, csr, retrieved, time.perf_counter() - t0)
        if progress is not None:
            progress(done, total)
        if cancel is not None and cancel.is_set():
            raise EvaluationCancelled(f"evaluation cancelled after {name}")
    return result


def authors_layout(result: EvaluationResult) -> dict[str, dict[str, dict[str, list[list[float]]]]]:
    """``{strategy: {n_aspects: {"success_ratio": [k][query], "category_success_ratio": [k][query]}}}``."""
    out: dict[str, dict[str, dict[str, list[list[float]]]]] = {}
    groups = aspect_groups(result.cases)
    for name, sr in result.strategies.items():
        per_n: dict[str, dict[str, list[list[float]]]] = {}
        for n, rows in groups.items():
            per_n[str(n)] = {
                "success_ratio": sr.rsr[rows].T.tolist(),
                "category_success_ratio": sr.csr[rows].T.tolist(),
            }
        out[name] = per_n
    return out


AUTHORS_FILE_NAMES: dict[str, str] = {s.id: s.authors_name for s in STRATEGIES.values() if s.authors_name}
"""Our strategy names that the authors' result files spell otherwise (``mrag`` and ``fusion-mrag`` are the same;
the LLM-assisted strategies are ours and keep their names)."""


def authors_file_layout(result: EvaluationResult) -> dict[str, dict[str, dict[str, list[list[float | int]]]]]:
    """The authors' result files (``results/*.json`` of their repository) exactly:
    ``{strategy: {n_aspects: {"rat": [k][query], "suc": ..., "category_rat": ..., "category_suc": ...}}}`` with
    their strategy names (:data:`AUTHORS_FILE_NAMES`). ``rat`` / ``category_rat`` are RSR / CSR; ``suc`` /
    ``category_suc`` are 1 where the ratio is 1 (every aspect, or every aspect's category, found) and 0 otherwise,
    as in their files. Loads in their plotting code; :func:`authors_layout` holds the same ratios under this
    project's names."""
    out: dict[str, dict[str, dict[str, list[list[float | int]]]]] = {}
    for name, per_n in authors_layout(result).items():
        out[AUTHORS_FILE_NAMES.get(_id_of(name), name)] = {
            n: {"rat": block["success_ratio"], "suc": _all_found(block["success_ratio"]),
                "category_rat": block["category_success_ratio"],
                "category_suc": _all_found(block["category_success_ratio"])}
            for n, block in per_n.items()}
    return out


def _id_of(name: str) -> str:
    """The id of a result's name (an alias such as ``recommended`` keeps its strategy's authors' name)."""
    try:
        return resolve(name).id
    except UnknownStrategyError:
        return name


PLOTTER_KEYS: dict[str, str] = {
    "standard": "standard-rag", "mrag": "multirag", "mrag-decay": "multirag-strategy-decay",
    "mrag-distance": "multirag-strategy-distance", "split": "split-rag",
    "split-weighted": "split-rag-strategy-weighted", "fusion": "fusion-rag", "fusion-mrag": "fusion-multirag",
}
"""The strategy keys the authors' CLI plotter reads (``multirag/plot/plotting.py`` of their repository, behind
``multirag-cli plot``), for our strategies: MRAG with importance, decay and distance voting, Split RAG with the
2^-p vote and the importance-weighted one, Fusion RAG and Fusion MRAG. It reads neither :func:`authors_layout`
(our names) nor :func:`authors_file_layout` (``mrag``, ``rat``...)."""

PLOTTER_QUERY_TYPES = (5, 10, 15, 20)
"""The aspect counts ("query types") the plotter's ``plot_all`` draws; each at k from the query type to 10 more."""


def plotter_layout(result: EvaluationResult) -> dict[str, dict[str, dict[str, list[list[float | int]]]]]:
    """The input of the authors' CLI plotter: ``{key: {n_aspects: {"success": [k][query], "success_ratio": ...,
    "category_success": ..., "category_success_ratio": ...}}}`` under :data:`PLOTTER_KEYS`. ``*_ratio`` are RSR /
    CSR (all the plotter reads); ``success`` / ``category_success`` are 1 where the ratio is 1, else 0, as their
    input format documents them. The LLM-assisted strategies keep their names (the plotter reads none of them).
    A key whose strategy the result lacks is left out (:func:`plotter_missing`): the plotter then stops with a
    KeyError at the first figure that needs it, rather than draw a strategy that was not run."""
    out: dict[str, dict[str, dict[str, list[list[float | int]]]]] = {}
    for name, per_n in authors_layout(result).items():
        out[PLOTTER_KEYS.get(name, name)] = {
            n: {"success": _all_found(block["success_ratio"]), "success_ratio": block["success_ratio"],
                "category_success": _all_found(block["category_success_ratio"]),
                "category_success_ratio": block["category_success_ratio"]}
            for n, block in per_n.items()}
    return out


def plotter_missing(strategies: Sequence[str]) -> list[str]:
    """The plotter's keys (:data:`PLOTTER_KEYS` order) that none of ``strategies`` fills."""
    return [key for name, key in PLOTTER_KEYS.items() if name not in strategies]


def plotter_notes(result: EvaluationResult) -> list[str]:
    """What the plotter cannot draw from :func:`plotter_layout` of ``result``, in words: the strategy keys left
    out (and which strategies fill them), and the query types or depths its ``plot_all`` needs that the result
    lacks. Empty when ``multirag-cli plot`` draws every figure from it."""
    notes = []
    if missing := plotter_missing(list(result.strategies)):
        absent = [name for name, key in PLOTTER_KEYS.items() if key in missing]
        notes.append(f"the authors' plotter reads {len(PLOTTER_KEYS)} strategy keys; {', '.join(missing)} "
                     f"{'is' if len(missing) == 1 else 'are'} left out (strategies {', '.join(absent)} were not "
                     "run), and it stops with a KeyError at the first figure that needs one")
    present = sorted(aspect_groups(result.cases))
    if any(n not in present for n in PLOTTER_QUERY_TYPES) or result.k_max < max(PLOTTER_QUERY_TYPES) + 11:
        have = ", ".join(str(n) for n in present) or "no"
        notes.append(f"its plot_all draws queries of {', '.join(map(str, PLOTTER_QUERY_TYPES))} aspects, each at k "
                     f"up to its aspect count + 11 ({max(PLOTTER_QUERY_TYPES) + 11} for "
                     f"{max(PLOTTER_QUERY_TYPES)}); these results hold queries of {have} aspects, scored to k = "
                     f"{result.k_max}: call its figure functions with their own aspect counts n (k up to n + 11)")
    return notes


def _all_found(ratios: list[list[float]]) -> list[list[int]]:
    """1 where a ratio is 1, else 0 (the authors' binary success)."""
    return [[int(r == 1.0) for r in row] for row in ratios]


def aspect_groups(cases: Sequence[QueryCase]) -> dict[int, list[int]]:
    """Query row indices per aspect count, ascending."""
    groups: dict[int, list[int]] = {}
    for i, case in enumerate(cases):
        groups.setdefault(case.n_aspects, []).append(i)
    return dict(sorted(groups.items()))


@dataclass(frozen=True)
class SummaryRow:
    strategy: str
    n_aspects: int
    k: int
    rsr: float
    csr: float
    weighted: float
    n_queries: int


def summarize(result: EvaluationResult, *, w: float = DEFAULT_W,
              k_rule: Callable[[int], list[int]] | None = None) -> list[SummaryRow]:
    """Mean RSR / CSR / weighted per strategy and aspect count at k = n and k = 2n (capped at k_max)."""
    k_rule = k_rule or (lambda n: sorted({min(n, result.k_max), min(2 * n, result.k_max)}))
    rows: list[SummaryRow] = []
    for name, sr in result.strategies.items():
        for n, idx in aspect_groups(result.cases).items():
            for k in k_rule(n):
                r = float(sr.rsr[idx, k - 1].mean())
                c = float(sr.csr[idx, k - 1].mean())
                rows.append(SummaryRow(name, n, k, r, c, weighted_success_ratio(r, c, w), len(idx)))
    return rows
