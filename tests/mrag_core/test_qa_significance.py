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
    assert res.t_statistic == math.inf and res.t_pvalue == 0.0
    assert res.note == "all differences are equal: zero variance"
