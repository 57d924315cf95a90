"""A stored evaluation run read back: :class:`RunMetrics` (:func:`load_run_metrics`), the notes on its
edited queries and its coverage, the run as an :class:`~mrag_core.evaluation.EvaluationResult`, and the views of
one run (relative improvement, single-aspect hits, the fused-depth caption).

Also :class:`EvaluationInputError` and :func:`query_fingerprint`, which the run, sweep, cost, export and comparison
modules (:mod:`services.workflows.evaluation_runs` and its ``eval_*`` siblings) share. No Streamlit here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

import db
from mrag_core.evaluation import (
    EvaluationResult,
    QueryCase,
    StrategyResult,
)
from mrag_core.metrics.weighted import weighted_success_ratio
from mrag_core.settings import DEFAULT_W
from mrag_core.strategy_registry import STRATEGIES

__all__ = [
    "EvaluationInputError",
    "RunMetrics",
    "coverage_note",
    "edited_note",
    "fused_depth_note",
    "load_run_metrics",
    "relative_improvement",
    "single_aspect_table",
    "to_evaluation_result",
]


class EvaluationInputError(ValueError):
    """The evaluation request cannot run (unknown corpus/query set/strategy, bad numbers, no queries)."""


def query_fingerprint(query: db.QueryRow) -> str:
    """``"<n_aspects>:<hash>"``: a query as a run scores it (aspect count; hash of its text and ground truth).
    A run stores one per scored query (``config["queries"]``), so that a query edited after the run is told
    apart (:attr:`RunMetrics.edited`) and grouped by the aspect count it was scored with."""
    digest = hashlib.sha256(json.dumps([query.text, sorted(query.ground_truth)]).encode()).hexdigest()[:12]
    return f"{query.n_aspects}:{digest}"


# --------------------------------------------------------------------------- loading and views

@dataclass
class RunMetrics:
    """A stored run as frames.

    * ``per_query``: one row per (strategy, query, k): ``strategy, query_id, n_aspects, k, rsr, csr, weighted``;
    * ``summary``: means over queries per (strategy, n_aspects, k) with ``n_queries``;
    * ``queries``: ``query_id, text, n_aspects, ground_truth`` of the scored queries;
    * ``retrieved``: ``{(strategy, query_id): [doc ids]}``;
    * ``details``: ``{(strategy, query_id): details}`` for results that have details (LLM cost, fallbacks);
    * ``edited``: scored queries whose text, ground truth or aspect count changed after the run (their stored
      scores are those of the old version; runs stored before fingerprints were kept report none).

    ``n_aspects`` is the aspect count a query had when the run scored it (its current one for older runs).
    """

    run: db.EvalRunInfo
    per_query: pd.DataFrame
    summary: pd.DataFrame
    queries: pd.DataFrame
    retrieved: dict[tuple[str, int], list[int]]
    details: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    edited: list[int] = field(default_factory=list)

    @property
    def strategies(self) -> list[str]:
        order = list(self.run.config.get("strategies", []))
        found = list(dict.fromkeys(self.per_query["strategy"])) if len(self.per_query) else []
        return [s for s in order if s in found] + [s for s in found if s not in order]

    @property
    def k_max(self) -> int:
        return int(self.run.config.get("k_max", 0)) or (int(self.per_query["k"].max()) if len(self.per_query) else 0)

    @property
    def w(self) -> float:
        return float(self.run.config.get("w", DEFAULT_W))


def load_run_metrics(store: db.Store, run_id: int) -> RunMetrics:
    """Frames of a stored run (see :class:`RunMetrics`). Raises NotFoundError."""
    run = db.get_eval_run(store, run_id)
    w = float(run.config.get("w", DEFAULT_W))
    results = db.load_eval_results(store, run_id)
    qrows = {q.id: q for q in db.list_queries(store, run.query_set_id)}
    saved = db.query_fingerprints(run.config)

    def aspects(qid: int) -> int:  # as scored: the run's fingerprint, else the query's current count
        if fp := saved.get(str(qid)):
            return int(str(fp).split(":", 1)[0])
        return qrows[qid].n_aspects if qid in qrows else 0

    recs: dict[str, list[Any]] = {k: [] for k in ("strategy", "query_id", "n_aspects", "k", "rsr", "csr")}
    retrieved: dict[tuple[str, int], list[int]] = {}
    details: dict[tuple[str, int], dict[str, Any]] = {}
    for r in results:
        if r.details:
            details[(r.strategy, r.query_id)] = r.details
        n = aspects(r.query_id)
        kk = len(r.rsr)
        recs["strategy"].extend([r.strategy] * kk)
        recs["query_id"].extend([r.query_id] * kk)
        recs["n_aspects"].extend([n] * kk)
        recs["k"].extend(range(1, kk + 1))
        recs["rsr"].extend(r.rsr)
        recs["csr"].extend(r.csr)
        retrieved[(r.strategy, r.query_id)] = r.retrieved
    per_query = pd.DataFrame(recs)
    per_query["weighted"] = (w * per_query["rsr"] + per_query["csr"]) / (w + 1.0)
    if len(per_query):
        summary = (per_query.groupby(["strategy", "n_aspects", "k"], sort=True)
                   .agg(rsr=("rsr", "mean"), csr=("csr", "mean"), weighted=("weighted", "mean"),
                        n_queries=("query_id", "nunique")).reset_index())
    else:
        summary = pd.DataFrame(columns=["strategy", "n_aspects", "k", "rsr", "csr", "weighted", "n_queries"])
    scored = sorted({r.query_id for r in results})
    queries = pd.DataFrame([{"query_id": q, "text": qrows[q].text if q in qrows else "",
                             "n_aspects": aspects(q),
                             "ground_truth": qrows[q].ground_truth if q in qrows else []} for q in scored],
                           columns=["query_id", "text", "n_aspects", "ground_truth"])
    edited = [q for q in scored if str(q) in saved and (q not in qrows or query_fingerprint(qrows[q]) != saved[str(q)])]
    return RunMetrics(run, per_query, summary, queries, retrieved, details, edited)


def edited_note(metrics: RunMetrics, limit: int = 10) -> str | None:
    """The warning for a run whose queries were edited after it ran (None when none was). For a done run it
    suggests a new run; for an unfinished one, resuming it (which scores the edited queries again)."""
    ids = metrics.edited
    if not ids:
        return None
    shown = ", ".join(f"#{q}" for q in ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
    one = len(ids) == 1
    return (f"Run #{metrics.run.id}: {len(ids)} of its {len(metrics.queries)} queries ({shown}) "
            f"{'was' if one else 'were'} edited after the run (text, ground truth or aspect count): "
            f"{'its' if one else 'their'} stored scores are those of the version the run searched. "
            + ("Start a new run to score the query set as it is now." if metrics.run.status == "done" else
               f"Resuming the run scores {'it' if one else 'them'} again as {'it is' if one else 'they are'} now."))


def coverage_note(metrics: RunMetrics) -> str | None:
    """The warning for a run stopped part-way; None when every strategy it was asked for scored the same queries.

    A run scores one strategy after the other, so a stop leaves the later strategies with fewer queries (their
    per-strategy means are then over different queries) and the last ones with none: those are named, since the
    views and exports leave out a strategy without results."""
    pq = metrics.per_query
    counts = {s: int(pq.loc[pq["strategy"] == s, "query_id"].nunique()) for s in metrics.strategies}
    missing = [s for s in metrics.run.config.get("strategies", []) if s not in counts]
    parts = []
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{s} {n}" for s, n in counts.items())
        parts.append(f"Its strategies scored different numbers of queries ({listed}), so their means are over "
                     "different queries and do not compare; the JSON export holds only the queries every strategy "
                     "scored.")
    if missing:
        one = len(missing) == 1
        parts.append(f"{', '.join(missing)} scored no query yet, so {'it is' if one else 'they are'} missing from "
                     "the tables, figures and exports below.")
    return " ".join([*parts, "Resume the run to score the rest."]) if parts else None


def to_evaluation_result(metrics: RunMetrics) -> EvaluationResult:
    """The stored run as an :class:`EvaluationResult` (queries by id; only queries every strategy has)."""
    pq = metrics.per_query
    strategies = metrics.strategies
    k_max = metrics.k_max
    common: set[int] | None = None
    for s in strategies:
        ids = set(pq.loc[pq["strategy"] == s, "query_id"])
        common = ids if common is None else common & ids
    qids = sorted(common or set())
    n_of = dict(zip(metrics.queries["query_id"], metrics.queries["n_aspects"]))
    result = EvaluationResult(k_max=k_max, cases=[QueryCase((), int(n_of.get(q, 0))) for q in qids])
    for s in strategies:
        sub = pq[pq["strategy"] == s]
        rsr = sub.pivot(index="query_id", columns="k", values="rsr").reindex(qids).to_numpy()
        csr = sub.pivot(index="query_id", columns="k", values="csr").reindex(qids).to_numpy()
        result.strategies[s] = StrategyResult(s, rsr, csr, [metrics.retrieved[(s, q)] for q in qids])
    return result


def k_for(n: int, k: int | None, k_max: int) -> int:
    return min(k if k is not None else n, k_max)


def relative_improvement(metrics: RunMetrics, *, baseline: str = "standard", k: int | None = None) -> pd.DataFrame:
    """Per (strategy, n_aspects): mean weighted ratio at ``k`` (default k = n_aspects) and its relative
    improvement over ``baseline``: ``weighted / weighted_baseline - 1`` (NaN when the baseline is 0).

    Both means are over the queries that the strategy and the baseline both scored (``queries``): in a stopped
    run one strategy may have more queries than the other, and an aspect count the baseline has not reached
    yet has no row (it raised KeyError)."""
    columns = ["strategy", "n_aspects", "k", "weighted", "baseline", "improvement", "queries"]
    pq = metrics.per_query
    if baseline not in set(pq["strategy"]):
        return pd.DataFrame(columns=columns)
    rows = []
    for n in sorted(set(pq["n_aspects"])):
        kk = k_for(int(n), k, metrics.k_max)
        at = pq[(pq["n_aspects"] == n) & (pq["k"] == kk)]
        base_q = at[at["strategy"] == baseline].set_index("query_id")["weighted"]
        for strat in metrics.strategies:
            if strat == baseline:
                continue
            own = at[at["strategy"] == strat].set_index("query_id")["weighted"]
            common = sorted(set(base_q.index) & set(own.index))
            if not common:
                continue
            base, val = float(base_q.loc[common].mean()), float(own.loc[common].mean())
            rows.append({"strategy": strat, "n_aspects": int(n), "k": kk, "weighted": val, "baseline": base,
                         "improvement": (val / base - 1.0) if base > 0 else float("nan"), "queries": len(common)})
    return pd.DataFrame(rows, columns=columns)


def single_aspect_table(metrics: RunMetrics, ks: Sequence[int] = (1, 2, 3)) -> pd.DataFrame:
    """Single-aspect queries: per strategy, how many found their document within the top k (k in ``ks``)."""
    pq = metrics.per_query[metrics.per_query["n_aspects"] == 1]
    rows = []
    for strat in metrics.strategies:
        sub = pq[pq["strategy"] == strat]
        row: dict[str, Any] = {"strategy": strat, "queries": int(sub["query_id"].nunique())}
        for k in ks:
            row[f"hits@{k}"] = int((sub.loc[sub["k"] == k, "rsr"] >= 1.0 - 1e-9).sum())
        rows.append(row)
    return pd.DataFrame(rows, columns=["strategy", "queries", *[f"hits@{k}" for k in ks]])


FUSED_RUN_NOTE = ("Fusion RAG, Fusion MRAG and the LLM-assisted strategies merge one list per sub-query (or LLM text) "
                  "by Reciprocal Rank Fusion. In a run, as in the MRAG authors' evaluation, the lists fused at k are "
                  "each searched to depth k: at a larger k every sub-query's list is longer, and documents that "
                  "several sub-queries find lower down can outrank a sub-query's first hit, so these curves can fall "
                  "as k grows. Compare fuses each sub-query's top k too: a query opened there from a run shows the "
                  "run's Fusion numbers at that k (given the same sub-queries).")


def fused_strategies(strategies: Sequence[str]) -> list[str]:
    """The strategies among ``strategies`` that fuse several texts' lists (Fusion, Fusion MRAG, LLM-assisted)."""
    return [s for s in strategies if s in STRATEGIES and STRATEGIES[s].kind.startswith("fusion")]


def fused_depth_note(strategies: Sequence[str]) -> str | None:
    """:data:`FUSED_RUN_NOTE` when any of ``strategies`` fuses lists, else None: the caption under a run's figures."""
    return FUSED_RUN_NOTE if fused_strategies(strategies) else None


def weighted(rsr: float, csr: float, w: float = DEFAULT_W) -> float:
    """Re-export of the weighted success ratio for views."""
    return weighted_success_ratio(rsr, csr, w)
