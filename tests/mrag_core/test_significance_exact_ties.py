"""Paired tests on success ratios that are fractions j/n: equal differences must count as equal, whatever the
last bit of their floating-point subtraction."""

from __future__ import annotations

import math

import pytest

from mrag_core.significance import paired_test, significance_mark


def test_equal_differences_of_thirds_are_tied_ranks_in_wilcoxon() -> None:
    # Seven 3-aspect queries: six gain one aspect (+1/3), one loses one (-1/3). As floats the gains are
    # 0.3333333333333333 or 0.33333333333333337 depending on the pair (2/3 - 1/3, 1 - 2/3, 1/3 - 0).
    a = [2 / 3, 1.0, 0.0, 1 / 3, 1.0, 2 / 3, 1 / 3]
    b = [1 / 3, 2 / 3, 1 / 3, 0.0, 2 / 3, 1 / 3, 0.0]
    res = paired_test(a, b)
    # |d| all equal: every rank is (1 + ... + 7) / 7 = 4; W- = 4 (the one loss), W+ = 24, statistic min = 4.
    assert res.wilcoxon_statistic == 4.0
    # Exact: the statistic is 4 x (number of losses); P(losses <= 1) = (1 + 7) / 2^7, two-sided 2 x 8/128.
    assert res.wilcoxon_pvalue == pytest.approx(0.125)
    # t: d = 1/3 x [1, 1, 1, 1, 1, 1, -1], mean 5/21, sd 2/sqrt(21) -> t = (5/21) / (2/sqrt(21)/sqrt(7)) = 2.5
    assert res.t_statistic == pytest.approx(2.5)
    assert (res.wins, res.ties, res.losses) == (6, 0, 1)
    assert significance_mark(res.wilcoxon_pvalue) == "n.s."


def test_equal_nonzero_differences_with_float_noise_are_zero_variance() -> None:
    # d = 1/3 - 0, 2/3 - 1/3, 1 - 2/3: all one third; the exact case of the module doc (zero variance).
    res = paired_test([1 / 3, 2 / 3, 1.0], [0.0, 1 / 3, 2 / 3])
    assert math.isnan(res.t_statistic) and math.isnan(res.t_pvalue) and significance_mark(res.t_pvalue) == ""
    assert res.note.startswith("every query differs by the same amount (+0.333): the t-test has no variance")
    # Wilcoxon: three equal positive ranks, W- = 0; exact two-sided p = 2 x 1/2^3.
    assert (res.wilcoxon_statistic, res.wilcoxon_pvalue) == (0.0, pytest.approx(0.25))


def test_three_equal_differences_whose_float_mean_is_not_exact_are_zero_variance() -> None:
    # Weighted ratios (2 rsr + csr) / 3 differing by 0.1 on three queries: the differences round to three equal
    # 0.1s, but their float mean is 0.1 + 2e-17 and their sample sd 1.7e-17, which gave t ~ 1e16 and '***'.
    a, b = [0.3 / 3, 1.8 / 3, 0.9 / 3], [0.0, 1.5 / 3, 0.6 / 3]
    res = paired_test(a, b)
    assert math.isnan(res.t_pvalue) and significance_mark(res.t_pvalue) == ""
    assert res.note.startswith("every query differs by the same amount (+0.100)")
    assert (res.wins, res.ties, res.losses) == (3, 0, 0) and res.wilcoxon_pvalue == pytest.approx(0.25)
