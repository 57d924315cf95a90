"""Bootstrap 95 % intervals of stored evaluation runs, for Evaluation Runs and its run comparison.

The means a run reports are over a sample of queries; the intervals (:mod:`mrag_core.intervals`: percentile
bootstrap, 2,000 resamples, seed 0) say how far those means could move with other queries of the same kind:

* :func:`accuracy_intervals` / :func:`with_mean_intervals`: per strategy of a run, the interval of each mean of
  the accuracy table (:func:`~services.workflows.eval_costs.accuracy_and_cost`, k = each query's aspect count
  unless asked);
* :func:`compare_intervals`: for compared (run, strategy) items, the interval of each item's mean per aspect count
  and over all queries, and of its paired difference of means against the reference, on the queries
  :func:`~services.workflows.eval_comparison.compare_runs` pairs;
* :func:`means_table_with_intervals`, :func:`tests_with_intervals`: those intervals next to the means and the paired
  tests, for display; :func:`comparison_csv`: the whole comparison as one CSV.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from mrag_core.intervals import DEFAULT_RESAMPLES, Interval, mean_interval, paired_difference_interval
from services.workflows import eval_comparison, eval_results

__all__ = ["CI_SUFFIX", "DIFF_CI_COLUMN", "INTERVAL_NOTE", "accuracy_intervals", "with_mean_intervals",
           "compare_intervals", "means_table_with_intervals", "tests_with_intervals", "comparison_csv"]

SEED = 0
CI_SUFFIX = " 95% CI"
DIFF_CI_COLUMN = "mean_diff" + CI_SUFFIX
INTERVAL_NOTE = (f"95% CI: percentile-bootstrap interval of the mean over the queries ({DEFAULT_RESAMPLES:,} resamples "
                 "of the queries, seed 0); for mean_diff, of the paired difference of means (queries resampled as "
                 "pairs). An interval of mean_diff that holds 0 means these queries cannot tell which is better. "
                 "With fewer than 2 queries there is no interval.")
"""The caption under tables that show intervals."""


def _k_for(n: int, k: int | None, k_max: int) -> int:
    return min(k if k is not None else n, k_max)


def accuracy_intervals(metrics: eval_results.RunMetrics, *, k: int | None = None,
                       columns: Sequence[str] = ("rsr", "csr", "weighted")) -> dict[tuple[str, str], Interval]:
    """``{(strategy, metric): Interval}`` of the means :func:`eval_costs.accuracy_and_cost` reports: each strategy's
    scored queries at ``k`` (default each query's aspect count, at most the run's k_max)."""
    pq = metrics.per_query
    out: dict[tuple[str, str], Interval] = {}
    for strat in metrics.strategies:
        sub = pq[pq["strategy"] == strat]
        want = sub["n_aspects"].map(lambda n, _km=metrics.k_max: _k_for(int(n), k, _km))
        at = sub[sub["k"] == want]
        for col in columns:
            out[(strat, col)] = mean_interval(at[col].to_numpy(), seed=SEED)
    return out


def with_mean_intervals(table: pd.DataFrame, metrics: eval_results.RunMetrics, *, k: int | None = None) -> pd.DataFrame:
    """``table`` (:func:`eval_costs.accuracy_and_cost`, one row per strategy) with a text column ``"<metric> 95% CI"``
    (``[low, high]``) right after each of its ``rsr``, ``csr`` and ``weighted`` columns."""
    cols = [c for c in ("rsr", "csr", "weighted") if c in table.columns]
    intervals = accuracy_intervals(metrics, k=k, columns=cols)
    out = table.copy()
    for col in cols:
        texts = [intervals[(s, col)].bounds_text() if (s, col) in intervals else "" for s in out["strategy"]]
        out.insert(out.columns.get_loc(col) + 1, col + CI_SUFFIX, texts)
    return out


def _item_values(store: Any, items: Sequence[tuple[int, str]], metric: str, k: int | None,
                 metrics: Mapping[int, eval_results.RunMetrics] | None,
                 ) -> tuple[list[tuple[str, pd.Series]], dict[int, int]]:
    """Each item's per-query ``metric`` read as :func:`eval_comparison.compare_runs` reads it (k = the asked k or
    the query's aspect count, at most the runs' shared k_max), and the aspect count of every query."""
    cache = dict(metrics or {})
    for run_id, _ in items:
        if run_id not in cache:
            cache[run_id] = eval_results.load_run_metrics(store, run_id)
    kmax = eval_comparison.shared_k_max([cache[run_id] for run_id, _ in items])
    series = []
    n_of: dict[int, int] = {}
    for m in cache.values():
        n_of.update({int(q): int(n) for q, n in zip(m.queries["query_id"], m.queries["n_aspects"])})
    for run_id, strat in items:
        pq = cache[run_id].per_query
        pq = pq[pq["strategy"] == strat]
        want = pq["n_aspects"].map(lambda n: _k_for(int(n), k, kmax))
        series.append((f"#{run_id} {strat}", pq[pq["k"] == want].set_index("query_id")[metric]))
    return series, n_of


def compare_intervals(store: Any, items: Sequence[tuple[int, str]], *, metric: str = "weighted",
                      k: int | None = None, metrics: Mapping[int, eval_results.RunMetrics] | None = None,
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Intervals of a run comparison (:func:`eval_comparison.compare_runs` with the same arguments; the first item is
    the reference), on the queries every item scored, per aspect count (as text) and ``"all"``:

    * ``means``: ``item, n_aspects, mean, low, high, queries``;
    * ``diffs``: for each item but the reference, ``item, reference, n_aspects, mean_diff, diff_low, diff_high,
      queries``: the item's mean minus the reference's, with the interval of that paired difference."""
    series, n_of = _item_values(store, items, metric, k, metrics)
    qids, groups = eval_comparison.common_queries_by_aspects(series, n_of)
    mean_rows, diff_rows = [], []
    ref_label, ref = series[0]
    for key, ids in [*sorted(groups.items()), ("all", qids)]:
        n = str(key)
        for label, s in series:
            iv = mean_interval(s.loc[ids].to_numpy(), seed=SEED)
            mean_rows.append({"item": label, "n_aspects": n, "mean": iv.estimate, "low": iv.low, "high": iv.high,
                              "queries": iv.n})
        for label, s in series[1:]:
            iv = paired_difference_interval(s.loc[ids].to_numpy(), ref.loc[ids].to_numpy(), seed=SEED)
            diff_rows.append({"item": label, "reference": ref_label, "n_aspects": n, "mean_diff": iv.estimate,
                              "diff_low": iv.low, "diff_high": iv.high, "queries": iv.n})
    return (pd.DataFrame(mean_rows, columns=["item", "n_aspects", "mean", "low", "high", "queries"]),
            pd.DataFrame(diff_rows, columns=["item", "reference", "n_aspects", "mean_diff", "diff_low", "diff_high",
                                             "queries"]))


def _bounds(low: float, high: float, signed: bool = False) -> str:
    return Interval(0.0, float(low), float(high), 2).bounds_text(signed=signed)


def means_table_with_intervals(table: pd.DataFrame, mean_ci: pd.DataFrame) -> pd.DataFrame:
    """:func:`eval_comparison.means_table` (rows: aspect counts and ``all``; columns: items) with, right after each
    item's column, ``"<item> 95% CI"``: the ``[low, high]`` of that mean (:func:`compare_intervals`)."""
    out = table.copy()
    by = {(r.item, str(r.n_aspects)): _bounds(r.low, r.high) for r in mean_ci.itertuples()}
    for item in list(table.columns):
        out.insert(out.columns.get_loc(item) + 1, f"{item}{CI_SUFFIX}",
                   [by.get((item, str(n)), "") for n in out.index])
    return out


def tests_with_intervals(tests: pd.DataFrame, diff_ci: pd.DataFrame) -> pd.DataFrame:
    """:func:`eval_comparison.compare_runs`' ``tests`` with ``mean_diff 95% CI`` (``[low, high]``, signed) right after
    ``mean_diff``, matched by item and aspect count."""
    by = {(r.item, str(r.n_aspects)): _bounds(r.diff_low, r.diff_high, signed=True) for r in diff_ci.itertuples()}
    out = tests.copy()
    where = out.columns.get_loc("mean_diff") + 1 if "mean_diff" in out.columns else len(out.columns)
    out.insert(where, DIFF_CI_COLUMN, [by.get((i, str(n)), "") for i, n in zip(out["item"], out["n_aspects"])]
               if len(out) else [])
    return out


def comparison_csv(metric: str, read_at: str, mean_ci: pd.DataFrame, tests: pd.DataFrame,
                   diff_ci: pd.DataFrame) -> str:
    """The run comparison as one CSV: a row per (item, aspect count) with its mean ``metric`` and interval, and,
    for items other than the reference, the paired difference with its interval next to the test p-values (raw
    and Holm-adjusted), win / tie / loss. ``read_at`` (:func:`eval_comparison.compare_k_label`) repeats at which k."""
    merged = mean_ci.rename(columns={"mean": metric, "low": f"{metric}_low", "high": f"{metric}_high"})
    diffs = diff_ci.drop(columns=["queries", "mean_diff"])
    merged = merged.merge(diffs, on=["item", "n_aspects"], how="left")
    test_cols = ["item", "n_aspects", "mean_diff", "t_p", "t_p_holm", "wilcoxon_p", "wilcoxon_p_holm", "wins", "ties",
                 "losses", "note"]
    merged = merged.merge(tests[[c for c in test_cols if c in tests.columns]], on=["item", "n_aspects"], how="left")
    merged.insert(0, "metric", metric)
    merged.insert(1, "read_at", read_at)
    order = ["metric", "read_at", "item", "reference", "n_aspects", "queries", metric, f"{metric}_low",
             f"{metric}_high", "mean_diff", "diff_low", "diff_high", "t_p", "t_p_holm", "wilcoxon_p",
             "wilcoxon_p_holm", "wins", "ties", "losses", "note"]
    return merged.reindex(columns=order).to_csv(index=False)
