"""The LLM cost of stored evaluation runs: per strategy (:func:`llm_cost`), per run with each call
counted once (:func:`llm_cost_total`, :func:`runs_llm_tokens`), the accuracy-and-cost table
(:func:`accuracy_and_cost`) and the notes under it. No Streamlit here.
"""

from __future__ import annotations

from typing import Any, Hashable, Iterable, Mapping, Sequence

import pandas as pd

import db
from mrag_core.llm_strategies import (
    LLM_FAMILIES,
    cost_summary,
    family_of,
)
from services.workflows.eval_results import RunMetrics, k_for, load_run_metrics

__all__ = [
    "accuracy_and_cost",
    "items_cost",
    "llm_cost",
    "llm_cost_total",
    "once_each_cost",
    "runs_llm_tokens",
    "cost_row",
    "shared_with",
    "llm_total_note",
    "shared_expansions_note",
    "sharing_expansions",
]


COST_COLUMNS = ["llm_queries", "prompt_tokens", "completion_tokens", "tokens", "tokens_per_query", "spent_tokens",
                "llm_s", "cached", "failed"]
SHARED_COLUMN = "shared_with"
"""The column naming the strategies that searched the same LLM expansions as a row's (their calls are shared)."""


def cost_row(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """:data:`COST_COLUMNS` of expansion records (:func:`~mrag_core.llm_strategies.cost_summary`)."""
    summary = cost_summary(records)
    return {"llm_queries": summary["expansions"], "prompt_tokens": summary["prompt_tokens"],
            "completion_tokens": summary["completion_tokens"], "tokens": summary["tokens"],
            "tokens_per_query": summary["tokens_per_query"], "spent_tokens": summary["spent_tokens"],
            "llm_s": summary["latency_s"], "cached": summary["cached"], "failed": summary["failed"]}


def _llm_records(metrics: RunMetrics, strategy: str | None = None) -> list[tuple[str, int, dict[str, Any]]]:
    """``(strategy, query id, details["llm"])`` of the run's results (of ``strategy`` when given)."""
    return [(s, q, d["llm"]) for (s, q), d in metrics.details.items()
            if (strategy is None or s == strategy) and isinstance(d.get("llm"), dict)]


def shared_with(strategies: Sequence[str], strategy: str) -> list[str]:
    """The other ``strategies`` that search the same LLM expansions as ``strategy`` (its family's other form:
    ``multi-query`` and ``multi-query-mrag`` search the same rewrites, one LLM call per query serving both)."""
    family = family_of(strategy)
    return [] if family is None else [s for s in strategies if s != strategy and family_of(s) == family]


def sharing_expansions(metrics: RunMetrics, strategy: str) -> list[str]:
    """The run's other strategies that search the same LLM expansions as ``strategy`` (:func:`shared_with`)."""
    return shared_with(metrics.strategies, strategy)


def llm_cost(metrics: RunMetrics, strategy: str) -> dict[str, Any]:
    """LLM cost of one strategy of a run, from its results' ``details["llm"]``
    (:func:`~mrag_core.llm_strategies.cost_summary`; all zeros for a strategy without an LLM).
    ``llm_queries`` = queries expanded by the LLM; ``tokens`` counts what the expansions cost (cache hits at their
    original cost), ``spent_tokens`` / ``llm_s`` what was sent / waited for when the results were computed.

    The cost of what this strategy searched, whether or not another strategy searched it too: ``shared_with``
    names the run's strategies that share these expansions (:func:`sharing_expansions`), whose rows count the
    same calls; adding rows up counts them once per strategy, :func:`llm_cost_total` counts each once.
    ``spent_tokens`` / ``llm_s`` are what the run sent / waited for over all its sessions for the strategy's LLM
    family (:func:`_sent_by_run`): a resume served from the cache (0 spent) what a stopped session had sent."""
    row = cost_row([r for _, _, r in _llm_records(metrics, strategy)])
    family = family_of(strategy)
    if family is not None:
        row["spent_tokens"], row["llm_s"] = _sent_by_run(metrics.run, row["spent_tokens"], row["llm_s"], family)
    return {**row, SHARED_COLUMN: ", ".join(sharing_expansions(metrics, strategy))}


def llm_cost_total(metrics: RunMetrics) -> dict[str, Any]:
    """LLM cost of the whole run (:data:`COST_COLUMNS`), each expansion counted once: one record per (LLM family,
    query), whichever strategies searched it. Of the records of one (family, query), that of the call actually
    sent is kept (a strategy scored in a later session got the same expansion from the cache: 0 spent, 0 s);
    so ``tokens`` is what the run's expansions cost, never counted once per strategy that shares them.

    ``spent_tokens`` / ``llm_s`` are what the run sent / waited for over all its sessions (:func:`_sent_by_run`):
    the stored results alone miss an expansion sent by a session that stopped before storing its result and
    served from the cache on resume (0 spent there)."""
    total = once_each_cost(_llm_records(metrics))
    spent, llm_s = _sent_by_run(metrics.run, total["spent_tokens"], total["llm_s"])
    return {**total, "spent_tokens": spent, "llm_s": llm_s}


def _sent_by_run(run: db.EvalRunInfo, stored_spent: int, stored_s: float, family: str | None = None
                 ) -> tuple[int, float]:
    """``(tokens, LLM seconds)`` the run actually sent / waited for (for ``family``'s expansions only, when given):
    the larger of its sessions' own totals (``llm_usage["total"]``, or ``llm_usage["families"][family]``:
    ``spent_tokens`` / ``latency_s``, each session's sent calls added up, cache hits 0) and what its stored results
    record (``stored_spent`` / ``stored_s``). Each is a lower bound: the results miss calls whose result a stopped
    session never stored; ``llm_usage`` misses, of a session still running or one that died without ending, the
    answers of its last :data:`USAGE_EVERY_S` (stored that often while expanding)."""
    usage = run.llm_usage if isinstance(run.llm_usage, dict) else {}
    if family is None:
        total = usage.get("total")
    else:
        families = usage.get("families")
        total = families.get(family) if isinstance(families, dict) else None
    total = total if isinstance(total, dict) else {}
    usage_spent, usage_s = total.get("spent_tokens"), total.get("latency_s")
    spent = max(int(stored_spent), int(usage_spent) if _is_number(usage_spent) else 0)
    seconds = max(float(stored_s), float(usage_s) if _is_number(usage_s) else 0.0)
    return spent, seconds


def _is_number(value: Any) -> bool:
    """True for an int or float that is not a bool (a JSON number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def once_each_cost(records: Iterable[tuple[str, Hashable, Mapping[str, Any]]]) -> dict[str, Any]:
    """:data:`COST_COLUMNS` of ``(strategy, query key, expansion record)`` triples with each expansion counted
    once: one record per (LLM family, query key), the family being the record's ``family`` or the strategy's;
    of the records of one expansion, that of the call actually sent (not ``cached``) is kept. The rule of
    :func:`llm_cost_total`, for any list of expansions (``bench`` keys its queries by position)."""
    once: dict[tuple[str, Hashable], Mapping[str, Any]] = {}
    for s, q, record in records:
        key = (str(record.get("family") or family_of(s)), q)
        kept = once.get(key)
        if kept is None or (kept.get("cached") and not record.get("cached")):
            once[key] = record
    return cost_row(once.values())


def runs_llm_tokens(store: db.Store, run_ids: Sequence[int]) -> dict[int, int]:
    """Per run: the tokens of its LLM expansions, each counted once (``tokens`` of :func:`llm_cost_total`, the
    total under the run's cost table), from its stored results alone; 0 for a run without any. Not the run's
    ``llm_usage["total"]["tokens"]``, which adds up its sessions: a resume's cache hits on the expansions an
    earlier session asked for count there a second time, at their original cost."""
    records = db.eval_llm_records(store, run_ids)
    return {rid: int(once_each_cost(records.get(rid, []))["tokens"]) for rid in run_ids}


def shared_expansions_note(strategies: Sequence[str]) -> str | None:
    """Which of ``strategies`` share their LLM expansions, said once under a cost table (None when none do)."""
    pairs = [" and ".join(g) for g in ([s for s in strategies if family_of(s) == f] for f in LLM_FAMILIES)
             if len(g) > 1]
    if not pairs:
        return None
    return (pairs[0] + " share their LLM expansions" + "".join(f", as do {p}" for p in pairs[1:])
            + " (one call per query serves both strategies): each of their rows counts those calls, so a sum of "
            "the rows counts them twice; the total counts each call once.")


def llm_total_note(metrics: RunMetrics) -> str | None:
    """The line under a run's cost table that totals its LLM-assisted strategies, each call counted once
    (:func:`llm_cost_total`), and says which share their expansions (:func:`shared_expansions_note`); None when
    the run has fewer than two LLM-assisted strategies (a single row is its own total)."""
    if sum(1 for s in metrics.strategies if family_of(s) is not None) < 2:
        return None
    total = llm_cost_total(metrics)
    shared = shared_expansions_note(metrics.strategies)
    return (f"All LLM-assisted strategies together, each LLM call counted once: {total['tokens']} tokens over "
            f"{total['llm_queries']} expansions, {total['spent_tokens']} spent, {total['llm_s']:.2f} LLM s."
            + (f" {shared}" if shared else ""))


def accuracy_and_cost(metrics: RunMetrics, *, k: int | None = None) -> pd.DataFrame:
    """Per strategy: mean RSR / CSR / weighted at k (default k = each query's aspect count) over all
    scored queries, the search seconds (``timing.evaluate``) and the LLM cost (:func:`llm_cost`):
    strategies that trade tokens for recall side by side with those that spend none."""
    pq = metrics.per_query
    search_s = metrics.run.timing.get("evaluate", {})
    rows = []
    for strat in metrics.strategies:
        sub = pq[pq["strategy"] == strat]
        want = sub["n_aspects"].map(lambda n, _km=metrics.k_max: k_for(int(n), k, _km))
        at = sub[sub["k"] == want]
        rows.append({"strategy": strat, "rsr": float(at["rsr"].mean()), "csr": float(at["csr"].mean()),
                     "weighted": float(at["weighted"].mean()),
                     "search_s": float(search_s.get(strat, 0.0)) if isinstance(search_s, dict) else 0.0,
                     **llm_cost(metrics, strat)})
    return pd.DataFrame(rows, columns=["strategy", "rsr", "csr", "weighted", "search_s", *COST_COLUMNS, SHARED_COLUMN])


def without_unused_cost(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (:func:`accuracy_and_cost`) without its LLM cost columns (``shared_with`` too) when every one of
    them is zero (no strategy of the run used an LLM); otherwise unchanged."""
    cost = [c for c in COST_COLUMNS if c in table.columns]
    if cost and not table[cost].astype(float).to_numpy().any():
        return table.drop(columns=[*cost, *([SHARED_COLUMN] if SHARED_COLUMN in table.columns else [])])
    return table


def items_cost(store: db.Store, items: Sequence[tuple[int, str]], *,
               metrics: dict[int, RunMetrics] | None = None) -> pd.DataFrame:
    """LLM cost (:func:`llm_cost`) of each (run, strategy) item, labelled ``#run strategy`` as in
    :func:`compare_runs`; ``shared_with`` names the strategies of the item's run that share its expansions."""
    cache = dict(metrics or {})
    rows = []
    for run_id, strat in items:
        if run_id not in cache:
            cache[run_id] = load_run_metrics(store, run_id)
        rows.append({"item": f"#{run_id} {strat}", **llm_cost(cache[run_id], strat)})
    return pd.DataFrame(rows, columns=["item", *COST_COLUMNS, SHARED_COLUMN])
