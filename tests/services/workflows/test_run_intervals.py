"""Bootstrap intervals of stored runs (services.workflows.run_intervals) on a hand-made run of three queries."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest

import db
from services.workflows import eval_comparison, eval_costs, eval_results
from services.workflows import run_intervals as ri
from tests.support.hand_run import hand_run


def test_accuracy_table_gets_an_interval_next_to_each_mean(store: db.Store) -> None:
    _, rid, _ = hand_run(store)
    m = eval_results.load_run_metrics(store, rid)
    ivs = ri.accuracy_intervals(m)
    # three values each: a resample of three copies of one value has probability 1/27 = 3.7 % > 2.5 %, so both
    # bounds are the extreme values whenever those appear once (and more so when twice)
    expected = {("standard", "weighted"): (4 / 9, 1 / 3, 0.5), ("mrag", "weighted"): (7 / 9, 0.5, 1.0),
                ("standard", "rsr"): (1 / 3, 0.0, 0.5), ("mrag", "rsr"): (0.75, 0.5, 1.0),
                ("standard", "csr"): (2 / 3, 0.5, 1.0), ("mrag", "csr"): (5 / 6, 0.5, 1.0)}
    for key, (mean, low, high) in expected.items():
        iv = ivs[key]
        assert (iv.estimate, iv.low, iv.high, iv.n) == (pytest.approx(mean), pytest.approx(low), pytest.approx(high),
                                                        3), key
    table = ri.with_mean_intervals(eval_costs.accuracy_and_cost(m), m)
    assert list(table.columns[:7]) == ["strategy", "rsr", "rsr 95% CI", "csr", "csr 95% CI", "weighted",
                                       "weighted 95% CI"]
    row = table.set_index("strategy")
    assert row.loc["standard", "weighted 95% CI"] == "[0.333, 0.500]"
    assert row.loc["mrag", "weighted 95% CI"] == "[0.500, 1.000]"
    assert row.loc["standard", "weighted"] == pytest.approx(4 / 9)  # the mean itself untouched
    at1 = ri.accuracy_intervals(m, k=1)  # k = 1 for all: mrag q2 weighted (2·.5 + 1)/3 = 2/3
    assert at1[("mrag", "weighted")].estimate == pytest.approx((1 + 2 / 3 + 0.5) / 3)


def test_comparison_intervals_per_aspect_count_and_for_the_paired_difference(store: db.Store) -> None:
    _, rid, _ = hand_run(store)
    items = [(rid, "standard"), (rid, "mrag")]
    means, tests = eval_comparison.compare_runs(store, items)
    mean_ci, diff_ci = ri.compare_intervals(store, items)
    got = {(r.item, r.n_aspects): (r.mean, r.low, r.high, r.queries) for r in mean_ci.itertuples()}
    s, m = f"#{rid} standard", f"#{rid} mrag"
    assert got[(s, "1")][0] == pytest.approx(1 / 3) and math.isnan(got[(s, "1")][1])  # one query: no interval
    assert got[(s, "2")][1:] == (0.5, 0.5, 2)  # constant: zero width
    # mrag at 2 aspects {5/6, 1/2}: resample means 1/2 (1/4), 2/3 (1/2), 5/6 (1/4) -> [1/2, 5/6]
    assert got[(m, "2")][1:3] == (pytest.approx(0.5), pytest.approx(5 / 6))
    assert got[(m, "all")][1:3] == (pytest.approx(0.5), pytest.approx(1.0))
    # the means are compare_runs' means
    for r in means.itertuples():
        assert got[(r.item, r.n_aspects)][0] == pytest.approx(r.weighted)
    diffs = diff_ci.set_index("n_aspects")
    assert diffs.loc["all", ["mean_diff", "diff_low", "diff_high"]].tolist() == pytest.approx([1 / 3, 0.0, 2 / 3])
    assert diffs.loc["2", ["diff_low", "diff_high"]].tolist() == pytest.approx([0.0, 1 / 3])
    assert diffs["mean_diff"].tolist() == pytest.approx(tests["mean_diff"].tolist())

    shown = ri.tests_with_intervals(tests, diff_ci).set_index("n_aspects")
    assert list(shown.columns[3:5]) == ["mean_diff", "mean_diff 95% CI"]
    assert shown["mean_diff 95% CI"].tolist() == ["", "[0.000, +0.333]", "[0.000, +0.667]"]
    table = ri.means_table_with_intervals(eval_comparison.means_table(means, "weighted", items), mean_ci)
    assert list(table.columns) == [s, f"{s} 95% CI", m, f"{m} 95% CI"]
    assert table.loc["all", f"{m} 95% CI"] == "[0.500, 1.000]" and table.loc["1", f"{s} 95% CI"] == ""


def test_the_comparison_csv_has_means_intervals_and_tests(store: db.Store) -> None:
    _, rid, _ = hand_run(store)
    items = [(rid, "standard"), (rid, "mrag")]
    means, tests = eval_comparison.compare_runs(store, items, metric="rsr")
    mean_ci, diff_ci = ri.compare_intervals(store, items, metric="rsr")
    csv = pd.read_csv(io.StringIO(ri.comparison_csv("rsr", "k = 1", mean_ci, tests, diff_ci)),
                      dtype={"n_aspects": str})
    assert len(csv) == 6 and set(csv["metric"]) == {"rsr"} and set(csv["read_at"]) == {"k = 1"}
    row = csv[(csv["item"] == f"#{rid} mrag") & (csv["n_aspects"] == "all")].iloc[0]
    # rsr at k = aspects: mrag 1, .75, .5; standard 0, .5, .5; d = 1, .25, 0
    assert (row["rsr"], row["rsr_low"], row["rsr_high"]) == (pytest.approx(0.75), pytest.approx(0.5),
                                                            pytest.approx(1.0))
    assert (row["mean_diff"], row["diff_low"], row["diff_high"]) == (pytest.approx(5 / 12), pytest.approx(0.0),
                                                                     pytest.approx(1.0))
    assert row["reference"] == f"#{rid} standard" and row["wins"] == 2 and row["ties"] == 1
    assert row["wilcoxon_p_holm"] == pytest.approx(tests.set_index(["item", "n_aspects"]).loc[
        (f"#{rid} mrag", "all"), "wilcoxon_p_holm"])
    ref = csv[(csv["item"] == f"#{rid} standard") & (csv["n_aspects"] == "all")].iloc[0]
    assert math.isnan(ref["mean_diff"]) and ref["rsr"] == pytest.approx(1 / 3)
