"""Home's summary of the newest evaluation run on the demo queries: Standard vs MRAG vs the recommended strategy,
with bootstrap 95 % intervals (:mod:`mrag_core.intervals`), and where each one loses, in words, from the data.

:func:`demo_summary` reads the store: the demo corpus and its query set (the markers of
:mod:`services.demo.store`), the newest finished run on that set that scored at least one of the three strategies,
and that run's per-query results. It reports, for the strategies the run has (in the run's order):

* two readings on the queries with the run's largest aspect count ``n``: at ``k = n`` and at a middle k of the
  run's ``1..k_max`` (``(1 + k_max) // 2``), each with the mean weighted ratio and RSR and their intervals;
* for each pair (MRAG against Standard, the recommended strategy against Standard and against MRAG), one
  sentence per aspect count (at ``k = n``) and per reading where the first is below the second, and one verdict
  over all queries at ``k = n``: the paired difference of the weighted ratio with its interval, and whether the
  interval tells the sign.

The recommended strategy is :data:`mrag_core.sentence_round_robin.STRATEGY_ID`; MRAG is the run's plain ``mrag``
under its voting variant (:func:`~services.workflows.evaluation_runs.apply_variant`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

import db
from mrag_core import sentence_round_robin as recommended
from mrag_core.intervals import Interval, mean_interval, paired_difference_interval
from mrag_core.wording import counted
from services.demo import DEMO_CORPUS_NAME
from services.demo.store import DEMO_QUERY_SET_NAME, demo_query_set_id
from services.workflows import eval_results
from services.workflows import evaluation_runs as er

__all__ = ["DemoSummary", "Reading", "demo_summary", "how_to_run", "how_to_add_recommended", "STANDARD"]

STANDARD = "standard"
RECOMMENDED = recommended.STRATEGY_ID
SEED = 0


@dataclass(frozen=True)
class Reading:
    """The queries with ``n_aspects`` aspects read at ``k``: per strategy, the mean weighted ratio and RSR with
    their intervals, over ``queries`` queries."""

    n_aspects: int
    k: int
    queries: int
    weighted: dict[str, Interval]
    rsr: dict[str, Interval]


@dataclass(frozen=True)
class DemoSummary:
    """What Home shows of the newest demo run (:func:`demo_summary`)."""

    run_id: int
    run_name: str
    model: str
    layer: object
    n_queries: int
    k_max: int
    strategies: list[str]
    labels: dict[str, str]
    readings: list[Reading]
    losses: list[str]
    verdicts: list[str]
    missing: list[str] = field(default_factory=list)

    @property
    def has_recommended(self) -> bool:
        return RECOMMENDED in self.strategies

    def table(self) -> pd.DataFrame:
        """One row per strategy, per reading two columns: ``weighted`` and ``RSR``, each ``mean [low, high]``."""
        rows = []
        for s in self.strategies:
            row: dict[str, str] = {"strategy": self.labels[s]}
            for r in self.readings:
                at = f"n = {r.n_aspects}, k = {r.k}"
                row[f"weighted ({at})"] = r.weighted[s].text()
                row[f"RSR ({at})"] = r.rsr[s].text()
            rows.append(row)
        return pd.DataFrame(rows)


def how_to_run() -> str:
    """Home's line before any run on the demo queries."""
    return (f"No evaluation run on the demo queries yet. Step 3 opens Evaluation Runs: choose the query set "
            f"\"{DEMO_QUERY_SET_NAME}\", the strategies standard, mrag and {RECOMMENDED} (the recommended one, alias "
            f"{recommended.ALIAS!r}), and Run evaluation (24 queries, under a minute on one CPU core once the index "
            "exists). This page then sums it up with 95% intervals. From a terminal: `mrag-studio eval --corpus "
            f"\"{DEMO_CORPUS_NAME}\" --query-set \"{DEMO_QUERY_SET_NAME}\" --strategies standard,mrag,{RECOMMENDED}`.")


def how_to_add_recommended(run_id: int) -> str:
    """The line under a summary whose run lacks the recommended strategy."""
    return (f"Run #{run_id} has no {RECOMMENDED} (the recommended strategy, alias {recommended.ALIAS!r}). To see it "
            f"here: Evaluation Runs, New run, query set \"{DEMO_QUERY_SET_NAME}\", add {RECOMMENDED} to Strategies "
            "next to standard and mrag, and Run evaluation; this page shows the newest run.")


def _label(strategy: str, mrag: str | None) -> str:
    if strategy == STANDARD:
        return "Standard"
    if strategy == RECOMMENDED:
        return recommended.LABEL.split(" (", 1)[0]
    if strategy == mrag:
        return "MRAG" if strategy == "mrag" else f"MRAG ({strategy.removeprefix('mrag-')})"
    return strategy


def _compared(run: db.EvalRunInfo) -> tuple[list[str], str | None]:
    """The run's strategies among Standard, its MRAG and the recommended one (run order), and its MRAG's name."""
    stored = list(run.config.get("strategies", []))
    variant = str(run.config.get("variant", "importance"))
    try:
        mrag = er.apply_variant(["mrag"], variant)[0]
    except eval_results.EvaluationInputError:
        mrag = "mrag"
    wanted = {STANDARD, mrag, RECOMMENDED}
    return [s for s in stored if s in wanted], mrag


def _at(pq: pd.DataFrame, strategy: str, n: int | None, k: int | None, k_max: int) -> pd.Series:
    """Per query (index) the rows of ``strategy`` with ``n`` aspects (all when None), read at ``k`` (None: at each
    query's aspect count), at most ``k_max``."""
    sub = pq[pq["strategy"] == strategy]
    if n is not None:
        sub = sub[sub["n_aspects"] == n]
    want = sub["n_aspects"].map(lambda a: min(k if k is not None else int(a), k_max))
    return sub[sub["k"] == want].set_index("query_id")


def _paired(a: pd.Series, b: pd.Series) -> tuple[Interval, float, float]:
    """Paired difference ``a - b`` over their common queries, with both means."""
    common = sorted(set(a.index) & set(b.index))
    x, y = a.loc[common].to_numpy(), b.loc[common].to_numpy()
    iv = paired_difference_interval(x, y, seed=SEED)
    mean_a = float(x.mean()) if len(common) else math.nan
    mean_b = float(y.mean()) if len(common) else math.nan
    return iv, mean_a, mean_b


def demo_summary(store: db.Store) -> DemoSummary | None:
    """The summary of the newest finished run on the demo queries that has Standard, MRAG or the recommended
    strategy (module doc); None when there is none (or the demo corpus or its query set is gone)."""
    qs_id = demo_query_set_id(store)
    if qs_id is None:
        return None
    # newest first
    runs = [r for r in db.list_eval_runs(store, query_set_id=qs_id) if r.status == "done" and r.n_results]
    for run in runs:
        strategies, mrag = _compared(run)
        if strategies:
            break
    else:
        return None
    m = eval_results.load_run_metrics(store, run.id)
    pq = m.per_query
    strategies = [s for s in strategies if s in set(pq["strategy"])]
    if not strategies:
        return None
    labels = {s: _label(s, mrag) for s in strategies}
    aspects = sorted(int(n) for n in pq["n_aspects"].unique())
    n_max, k_max = aspects[-1], m.k_max
    settings = list(dict.fromkeys([min(n_max, k_max), (1 + k_max) // 2]))
    readings = []
    for k in settings:
        weighted, rsr = {}, {}
        for s in strategies:
            at = _at(pq, s, n_max, k, k_max)
            weighted[s] = mean_interval(at["weighted"].to_numpy(), seed=SEED)
            rsr[s] = mean_interval(at["rsr"].to_numpy(), seed=SEED)
        readings.append(Reading(n_max, k, max(iv.n for iv in weighted.values()), weighted, rsr))
    pairs = [(a, b) for a, b in ((mrag, STANDARD), (RECOMMENDED, STANDARD), (RECOMMENDED, mrag))
             if a in strategies and b in strategies]
    losses: list[str] = []
    verdicts: list[str] = []
    k_mid = settings[-1]
    for a, b in pairs:
        la, lb = labels[a], labels[b]
        for col, name in (("weighted", "weighted ratio"), ("rsr", "RSR")):
            parts = []
            places = [(n, min(n, k_max)) for n in aspects]
            if k_mid != min(n_max, k_max):
                places.append((n_max, k_mid))
            for n, k in places:
                iv, ma, mb = _paired(_at(pq, a, n, k, k_max)[col], _at(pq, b, n, k, k_max)[col])
                if iv.n and ma < mb - 1e-9:
                    parts.append(f"{counted(n, 'aspect')}, k = {k}: {ma:.2f} vs {mb:.2f} "
                                 f"({counted(iv.n, 'query', 'queries')})")
            if parts:
                losses.append(f"{la} is below {lb} on the {name} at " + "; ".join(parts) + ".")
        iv, ma, mb = _paired(_at(pq, a, None, None, k_max)["weighted"], _at(pq, b, None, None, k_max)["weighted"])
        if not iv.n:
            continue
        tells = ("the interval holds 0: these queries cannot tell them apart" if not iv.excludes_zero
                 else f"the interval excludes 0: {la} is {'above' if iv.estimate > 0 else 'below'} {lb} here")
        verdicts.append(f"{la} vs {lb}, all {iv.n} queries at k = each query's aspect count: weighted ratio "
                        f"{ma:.3f} vs {mb:.3f}, difference {iv.text(signed=True)}; {tells}.")
    missing = [] if RECOMMENDED in strategies else [how_to_add_recommended(run.id)]
    return DemoSummary(run.id, run.name or "", str(run.config.get("model", "?")), run.config.get("layer", "?"),
                       int(pq["query_id"].nunique()), k_max, strategies, labels, readings, losses, verdicts, missing)
