"""Comparing stored evaluation runs: :func:`compare_runs` (paired tests, Holm-adjusted,
:func:`with_holm`), the notes on k and w, the per-query table, and opening a query of a run in Compare
(:func:`drilldown`). No Streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import pandas as pd

import db
from mrag_core.settings import DEFAULT_C
from mrag_core.significance import holm_adjust, paired_test, significance_mark
from mrag_core.strategy_registry import STRATEGIES
from services.workflows.eval_results import EvaluationInputError, RunMetrics, k_for, load_run_metrics

__all__ = [
    "DrillDown",
    "compare_runs",
    "drilldown",
    "means_table",
    "signed",
]


def _items_metrics(store: db.Store, items: Sequence[tuple[int, str]],
                   metrics: Mapping[int, RunMetrics] | None) -> dict[int, RunMetrics]:
    """``metrics`` with every run of ``items`` loaded (those missing read from the store)."""
    cache = dict(metrics or {})
    for run_id, _ in items:
        if run_id not in cache:
            cache[run_id] = load_run_metrics(store, run_id)
    return cache


def shared_k_max(metrics: Iterable[RunMetrics]) -> int:
    """The largest k that every run of ``metrics`` scored: the smallest k_max. Compared items are read at
    ``min(k, shared_k_max)`` (k = the query's aspect count by default), so that two runs scored with different k_max
    are never compared at two different k (at k = 25, a run of k_max 10 read at k = 10 would look worse than the
    same retrieval read at k = 25)."""
    return min(m.k_max for m in metrics)


def _most_aspects(metrics: Mapping[int, RunMetrics]) -> int:
    """The largest aspect count among the compared runs' queries (the k read there when k follows it)."""
    return max((int(n) for m in metrics.values() for n in m.queries["n_aspects"]), default=0)


def compare_k_note(metrics: Mapping[int, RunMetrics], k: int | None) -> str | None:
    """The caption for compared runs scored with different k_max, when that lowers the k read (the asked ``k``, or
    the largest aspect count of their queries when k follows the aspect count); None otherwise."""
    ranges = {rid: m.k_max for rid, m in metrics.items()}
    if len(set(ranges.values())) < 2:
        return None
    cap = shared_k_max(metrics.values())
    wanted = k if k is not None else _most_aspects(metrics)
    if wanted <= cap:
        return None
    listed = ", ".join(f"#{rid} k = 1..{km}" for rid, km in ranges.items())
    asked = f"k = {k}" if k is not None else "k = the number of aspects"
    return (f"These runs scored different ranges of k ({listed}): every item is read at {asked}, but at most "
            f"k = {cap}, the largest k all of them scored, so each pair is compared at the same k.")


def compare_k_label(metrics: Mapping[int, RunMetrics], k: int | None) -> str:
    """At which k :func:`compare_runs` reads the compared runs, for the heading of its means: ``k = 5`` for a
    chosen k, ``k = each query's number of aspects`` when k follows the aspect count, each capped at
    :func:`shared_k_max` when that lowers it (:func:`compare_k_note` says why):
    ``k = 2 (5 asked; 2 is the largest k every run scored)``, ``k = each query's number of aspects, at most 2``."""
    cap = shared_k_max(metrics.values())
    if k is not None:
        return f"k = {k}" if k <= cap else f"k = {cap} ({k} asked; {cap} is the largest k every run scored)"
    return "k = each query's number of aspects" + (f", at most {cap}" if _most_aspects(metrics) > cap else "")


def compare_w_note(metrics: Mapping[int, RunMetrics], metric: str) -> str | None:
    """The warning for comparing the weighted ratio of runs stored with different w (None otherwise): each run's
    weighted ratio is (w·RSR + CSR) / (w + 1) with its own w, so the same retrieval scores differently."""
    weights = {rid: m.w for rid, m in metrics.items()}
    if metric != "weighted" or len(set(weights.values())) < 2:
        return None
    listed = ", ".join(f"#{rid} w = {w:g}" for rid, w in weights.items())
    return (f"These runs weight exact hits differently ({listed}): each weighted ratio is (w·RSR + CSR) / (w + 1) "
            "with its run's w, so their weighted ratios do not compare. Compare rsr or csr instead.")


def compare_runs(
    store: db.Store,
    items: Sequence[tuple[int, str]],
    *,
    metric: str = "weighted",
    k: int | None = None,
    metrics: dict[int, RunMetrics] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Compare (run, strategy) items on the same queries; the first item is the reference.

    Returns ``(means, tests)``: ``means`` has one row per (item, n_aspects) with the mean ``metric``
    at k (default k = n_aspects) and the number of paired queries; ``tests`` one row per
    (item other than the reference, n_aspects, plus ``"all"``) with the paired t-test and Wilcoxon
    p-values and win/tie/loss of the item against the reference, over queries both have; the p-values also
    Holm-adjusted over each item's rows, and the significance marks read from the adjusted ones (:func:`with_holm`).
    Every item is read at the same k, at most :func:`shared_k_max` of the runs (a run scored with a smaller k_max
    has no larger k; :func:`compare_k_note` says so).
    """
    if len(items) < 2:
        raise EvaluationInputError("choose at least two runs (or strategies) to compare")
    if metric not in ("rsr", "csr", "weighted"):
        raise EvaluationInputError(f"unknown metric {metric!r}")
    cache = _items_metrics(store, items, metrics)
    kmax = shared_k_max([cache[run_id] for run_id, _ in items])
    series: list[tuple[str, pd.Series]] = []
    for run_id, strat in items:
        m = cache[run_id]
        pq = m.per_query[m.per_query["strategy"] == strat]
        if pq.empty:
            raise EvaluationInputError(f"run {run_id} has no results for strategy {strat!r}")
        want = pq["n_aspects"].map(lambda n: k_for(int(n), k, kmax))
        at = pq[pq["k"] == want].set_index("query_id")
        series.append((f"#{run_id} {strat}", at[metric]))
    sets = {cache[run_id].run.query_set_id: run_id for run_id, _ in reversed(items)}
    if len(sets) > 1:
        names = {q: _query_set_name(store, q) for q in sets}
        listed = ", ".join(f"#{rid} on {names[q]}" for q, rid in sorted(sets.items(), key=lambda kv: kv[1]))
        raise EvaluationInputError(f"These runs were scored on different query sets ({listed}) and share no query: "
                                   "paired tests compare the same queries, so choose runs of one query set.")
    n_of: dict[int, int] = {}
    for m in cache.values():
        n_of.update(dict(zip(m.queries["query_id"], m.queries["n_aspects"])))
    qids, groups = common_queries_by_aspects(series, n_of)
    means_rows = []
    test_rows = []
    ref_label, ref = series[0]
    for n_key, ids in [*sorted(groups.items()), ("all", qids)]:
        n = str(n_key)  # aspect count as text, "all" for every query (one column type)
        for label, s in series:
            means_rows.append({"item": label, "n_aspects": n, metric: float(s.loc[ids].mean()) if ids else float("nan"),
                               "queries": len(ids)})
        for label, s in series[1:]:
            t = paired_test(s.loc[ids].to_numpy(), ref.loc[ids].to_numpy())
            test_rows.append({"item": label, "reference": ref_label, "n_aspects": n, "queries": t.n,
                              "mean_diff": _no_negative_zero(t.mean_diff), "t_p": t.t_pvalue,
                              "wilcoxon_p": t.wilcoxon_pvalue,
                              "wins": t.wins, "ties": t.ties, "losses": t.losses, "note": t.note})
    return pd.DataFrame(means_rows), with_holm(pd.DataFrame(test_rows))


HOLM_NOTE = ("Each item is tested against the reference once per aspect count and once over all queries, so some "
             "raw p-values can fall below 0.05 by chance alone. t_p_holm and wilcoxon_p_holm are Holm-adjusted over "
             "the item's own tests (Holm-Bonferroni: the smallest of its m p-values times m, the next times m - 1, and "
             "so on, never below the one before, at most 1), and the marks are read from these adjusted p-values: "
             "\\* p < 0.05, \\*\\* p < 0.01, \\*\\*\\* p < 0.001, n.s. not significant. Where a test cannot "
             "answer there is no p-value (the note says why), and it does not count in m.")
"""The caption of Compare runs' significance table: what the Holm columns are and that the marks read them."""

TESTS_COLUMNS = ["item", "reference", "n_aspects", "queries", "mean_diff", "t_p", "t_p_holm", "t_sig", "wilcoxon_p",
                 "wilcoxon_p_holm", "wilcoxon_sig", "wins", "ties", "losses", "note"]


def with_holm(tests: pd.DataFrame) -> pd.DataFrame:
    """``tests`` (one row per item and aspect count, with raw ``t_p`` and ``wilcoxon_p``) with Holm-adjusted
    p-values (``t_p_holm``, ``wilcoxon_p_holm``: :func:`~mrag_core.significance.holm_adjust` over the rows of one
    item, the family of its tests against the reference) and the significance marks of the adjusted values
    (``t_sig``, ``wilcoxon_sig``), in :data:`TESTS_COLUMNS` order. NaN p-values stay NaN and count in no family."""
    out = tests.copy()
    for raw in ("t_p", "wilcoxon_p"):
        adjusted = pd.Series(float("nan"), index=out.index, dtype=float)
        if len(out):
            for _, rows in out.groupby("item", sort=False)[raw]:
                adjusted.loc[rows.index] = holm_adjust(rows.tolist())
        out[f"{raw}_holm"] = adjusted
        out[raw.replace("_p", "_sig")] = adjusted.map(significance_mark)
    return out.reindex(columns=TESTS_COLUMNS)


def _query_set_name(store: db.Store, query_set_id: int) -> str:
    try:
        return repr(db.get_query_set(store, query_set_id).name)
    except db.NotFoundError:
        return f"query set {query_set_id} (deleted)"


def _no_negative_zero(x: float, digits: int = 12) -> float:
    """``x`` with rounding noise below ``10**-digits`` (and ``-0.0``) turned into ``0.0``."""
    return 0.0 if abs(x) < 10.0 ** -digits else float(x)


def signed(x: float, digits: int = 3) -> str:
    """A difference for display: ``+0.125``, ``-0.042``, and ``0.000`` (never ``-0.000``) when it rounds to zero
    at ``digits`` decimals; NaN as ``""``."""
    if x is None or x != x:
        return ""
    text = f"{x:+.{digits}f}"
    return f"{0.0:.{digits}f}" if float(text) == 0.0 else text


def means_table(means: pd.DataFrame, metric: str, items: Sequence[tuple[int, str]]) -> pd.DataFrame:
    """:func:`compare_runs`' ``means`` as a table: one row per aspect count (ascending, ``all`` last), one column
    per item in the order they were chosen (the reference first)."""
    pivot = means.pivot(index="n_aspects", columns="item", values=metric)
    columns = [c for c in dict.fromkeys(f"#{r} {s}" for r, s in items) if c in pivot.columns]
    rows = sorted(pivot.index, key=lambda n: (n == "all", int(n) if str(n).isdigit() else 0, str(n)))
    return pivot.loc[rows, columns]


@dataclass(frozen=True)
class DrillDown:
    """What the Compare page needs to show one query of a run as the run scored it: the index the run searched
    (``embedding_run_id``, None when it no longer exists), the voting variant, c, k (None: the query's number of
    aspects, as the run's k = aspects), Compare's strategies for the chosen items, and the run's seed (the head
    importance: 0 is the one stored with the index; Compare samples another seed's pairs as the run did)."""

    run_id: int
    query_id: int
    embedding_run_id: int | None
    variant: str
    c: int
    k: int | None
    strategies: list[str]
    seed: int


COMPARE_STRATEGIES = tuple(s.id for s in STRATEGIES.values() if s.compare)  # Compare's own (non-LLM) strategies


def drilldown(store: db.Store, items: Sequence[tuple[int, str]], query_id: int, *, run_id: int | None = None,
              k: int | None = None) -> DrillDown:
    """The settings of run ``run_id`` (default: the first item's run) for opening ``query_id`` in Compare.

    The index: the one the run searched, else the finished index of its model, layer and pooling; voting: that
    of the first MRAG-like item of that run (its ``variant`` otherwise); c: the run's c; strategies: Compare's
    kinds of the chosen items (``mrag-decay`` -> ``mrag``), in Compare's order."""
    if not items:
        raise EvaluationInputError("choose at least one run to open in Compare")
    rid = run_id if run_id is not None else items[0][0]
    try:
        info = db.get_eval_run(store, rid)
    except db.NotFoundError as exc:
        raise EvaluationInputError(f"evaluation run {rid} does not exist") from exc
    cfg = info.config
    index_id = _searched_index(store, info)
    specs = [STRATEGIES[s] for _, s in items if s in STRATEGIES]
    voted = [STRATEGIES[s] for r, s in items
             if r == rid and s in STRATEGIES and STRATEGIES[s].kind in ("mrag", "fusion-mrag")
             and not STRATEGIES[s].llm]
    variant = voted[0].variant if voted else str(cfg.get("variant", "importance"))
    kinds = {sp.kind for sp in specs if not sp.llm}
    return DrillDown(run_id=rid, query_id=int(query_id), embedding_run_id=index_id, variant=variant,
                     c=int(cfg.get("c", DEFAULT_C)), k=k, seed=int(info.seed or 0),
                     strategies=[s for s in COMPARE_STRATEGIES if STRATEGIES[s].kind in kinds])


def _searched_index(store: db.Store, info: db.EvalRunInfo) -> int | None:
    """The finished index run ``info`` searched (or, when that is gone, the one of its model, layer and pooling)."""
    if info.embedding_run_id is not None:
        try:
            if db.get_embedding_run(store, info.embedding_run_id).status == "done":
                return info.embedding_run_id
        except db.NotFoundError:
            pass
    cfg = info.config
    for run in db.list_embedding_runs(store, info.corpus_id, status="done"):
        if (run.model_name == cfg.get("model") and run.layer == cfg.get("layer")
                and run.pooling == cfg.get("pooling", run.pooling)):
            return run.id
    return None


def per_query_comparison(store: db.Store, items: Sequence[tuple[int, str]], *, k: int | None = None,
                         metrics: dict[int, RunMetrics] | None = None) -> pd.DataFrame:
    """Weighted ratio per query (rows) and item (columns) at k (default n_aspects, at most :func:`shared_k_max` of
    the runs, as :func:`compare_runs` reads them), with query text."""
    cache = _items_metrics(store, items, metrics)
    kmax = shared_k_max([cache[run_id] for run_id, _ in items])
    frames = []
    texts: dict[int, str] = {}
    n_of: dict[int, int] = {}
    for run_id, strat in items:
        m = cache[run_id]
        texts.update(dict(zip(m.queries["query_id"], m.queries["text"])))
        n_of.update(dict(zip(m.queries["query_id"], m.queries["n_aspects"])))
        pq = m.per_query[m.per_query["strategy"] == strat]
        want = pq["n_aspects"].map(lambda n: k_for(int(n), k, kmax))
        frames.append(pq[pq["k"] == want].set_index("query_id")["weighted"].rename(f"#{run_id} {strat}"))
    out = pd.concat(frames, axis=1, join="inner").reset_index()
    out.insert(1, "n_aspects", out["query_id"].map(n_of))
    out.insert(2, "text", out["query_id"].map(texts))
    return out


def common_queries_by_aspects(series: Sequence[tuple[str, pd.Series]],
                              n_of: Mapping[int, int]) -> tuple[list[int], dict[int, list[int]]]:
    """The query ids every series (label, values by query id) scored, ascending, and the same grouped by their
    aspect count (``n_of``: query id -> aspects; 0 when unknown): the queries paired comparisons are made on."""
    common = set(series[0][1].index)
    for _, values in series[1:]:
        common &= set(values.index)
    qids = sorted(common)
    groups: dict[int, list[int]] = {}
    for q in qids:
        groups.setdefault(int(n_of.get(q, 0)), []).append(q)
    return qids, groups
