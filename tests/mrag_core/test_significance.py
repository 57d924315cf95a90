"""Paired significance tests, checked against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from mrag_core.significance import paired_test, win_tie_loss

# Five queries, run A vs run B. Differences d = [0.1, 0.2, 0.3, 0.4, -0.05].
A = [0.6, 0.9, 0.7, 1.0, 0.3]
B = [0.5, 0.7, 0.4, 0.6, 0.35]


def test_paired_t_and_wilcoxon_by_hand() -> None:
    d = [x - y for x, y in zip(A, B)]
    n = len(d)
    mean = sum(d) / n  # 0.95 / 5 = 0.19
    var = sum((x - mean) ** 2 for x in d) / (n - 1)  # 0.122 / 4 = 0.0305
    t = mean / math.sqrt(var / n)  # 0.19 / sqrt(0.0061) = 2.4327
    assert mean == pytest.approx(0.19)
    assert var == pytest.approx(0.0305)
    assert t == pytest.approx(2.4327007, abs=1e-6)
    # Two-sided p with 4 degrees of freedom, closed-form Student CDF for nu = 4:
    # F(t) = 1/2 + 3/8 * u * (1 - t^2 / (12 (1 + t^2/4))), u = t / sqrt(1 + t^2/4).
    u = t / math.sqrt(1 + t * t / 4)
    p = 2 * (1 - (0.5 + 3 / 8 * u * (1 - t * t / (12 * (1 + t * t / 4)))))

    res = paired_test(A, B)
    assert res.n == 5
    assert res.mean_a == pytest.approx(0.7)
    assert res.mean_b == pytest.approx(0.51)
    assert res.mean_diff == pytest.approx(0.19)
    assert res.t_statistic == pytest.approx(t, rel=1e-9)
    assert res.t_pvalue == pytest.approx(p, rel=1e-6)
    assert res.t_pvalue == pytest.approx(0.071771, abs=1e-5)
    # Wilcoxon: ranks of |d| = 0.05 (1), 0.1 (2), 0.2 (3), 0.3 (4), 0.4 (5); W- = 1, W+ = 14.
    # Exact two-sided p: 2 * #{subsets of 1..5 with rank sum <= 1} / 2^5 = 2 * 2 / 32.
    assert res.wilcoxon_statistic == 1.0
    assert res.wilcoxon_pvalue == pytest.approx(0.125)
    assert (res.wins, res.ties, res.losses) == (4, 0, 1)
    # Swapping the runs flips the sign and the win/loss counts, not the p-values.
    rev = paired_test(B, A)
    assert rev.t_statistic == pytest.approx(-t)
    assert rev.t_pvalue == pytest.approx(res.t_pvalue)
    assert (rev.wins, rev.ties, rev.losses) == (1, 0, 4)


def test_all_zero_differences_give_p_one() -> None:
    res = paired_test([1.0, 0.5, 0.0], [1.0, 0.5, 0.0])
    assert (res.t_statistic, res.t_pvalue, res.wilcoxon_pvalue) == (0.0, 1.0, 1.0)
    assert (res.wins, res.ties, res.losses) == (0, 3, 0)
    assert "zero" in res.note


def test_constant_nonzero_difference_and_ties() -> None:
    res = paired_test([1.0, 1.0, 0.5, 0.25], [0.5, 0.5, 0.0, 0.25])
    # d = [0.5, 0.5, 0.5, 0]: the tie is counted, the t statistic is computed on all four
    # (mean 0.375, sd 0.25 -> t = 0.375 / (0.25 / 2) = 3).
    assert (res.wins, res.ties, res.losses) == (3, 1, 0)
    assert res.t_statistic == pytest.approx(3.0)


def test_equal_nonzero_differences_leave_the_t_test_undefined_not_overwhelming() -> None:
    """Two queries that each gain exactly 0.1 read as t = inf, p = 0, '***'. With zero variance the t-test has
    nothing to test: no statistic, no p-value, no stars; the Wilcoxon test and win/tie/loss still stand."""
    from mrag_core.significance import significance_mark

    res = paired_test([0.6, 0.9], [0.5, 0.8])  # d = [0.1, 0.1]
    assert math.isnan(res.t_statistic) and math.isnan(res.t_pvalue)
    assert significance_mark(res.t_pvalue) == ""
    assert res.mean_diff == pytest.approx(0.1)
    assert res.note == ("every query differs by the same amount (+0.100): the t-test has no variance to test and "
                        "gives no p-value; the Wilcoxon test and win/tie/loss still apply")
    # Wilcoxon: ranks 1.5 and 1.5, both positive: W- = 0; exact two-sided p = 2 x P(W <= 0) = 2 x 1/4.
    assert (res.wilcoxon_statistic, res.wilcoxon_pvalue) == (0.0, pytest.approx(0.5))
    assert significance_mark(res.wilcoxon_pvalue) == "n.s."
    assert (res.wins, res.ties, res.losses) == (2, 0, 0)
    worse = paired_test([0.5, 0.25], [1.0, 0.75])  # d = [-0.5, -0.5]
    assert math.isnan(worse.t_pvalue) and "(-0.500)" in worse.note and (worse.wins, worse.losses) == (0, 2)


def test_win_tie_loss_tolerance_and_bad_input() -> None:
    assert win_tie_loss([0.3, 0.5 + 1e-12, 0.1], [0.2, 0.5, 0.4]) == (1, 1, 1)
    with pytest.raises(ValueError, match="same number"):
        paired_test([1.0, 2.0], [1.0])
    single = paired_test([1.0], [0.0])
    assert math.isnan(single.t_pvalue) and single.wins == 1


def test_significance_marks_at_the_conventional_levels() -> None:
    from mrag_core.significance import significance_mark

    assert [significance_mark(p) for p in (0.0004, 0.001, 0.009, 0.01, 0.049, 0.05, 0.7)] == \
        ["***", "**", "**", "*", "*", "n.s.", "n.s."]
    assert significance_mark(float("nan")) == ""
