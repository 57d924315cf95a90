"""Percentile-bootstrap intervals (mrag_core.intervals): hand-checkable cases, scipy and a direct loop agree."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mrag_core.intervals import Interval, bootstrap_means, mean_interval, paired_difference_interval


def _loop_interval(values, level=0.95, n_resamples=2000, seed=0):
    """The module doc's recipe written out one resample at a time (no vectorisation)."""
    rng = np.random.default_rng(seed)
    n = len(values)
    idx = rng.integers(0, n, size=(n_resamples, n))
    means = []
    for b in range(n_resamples):
        total = 0.0
        for j in range(n):
            total += values[idx[b, j]]
        means.append(total / n)
    means.sort()
    alpha = 1 - level

    def pct(p):  # numpy's default "linear": position p/100 * (B - 1) between order statistics
        pos = p / 100 * (n_resamples - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n_resamples - 1)
        return means[lo] + (pos - lo) * (means[hi] - means[lo])

    return pct(100 * alpha / 2), pct(100 * (1 - alpha / 2))


def test_constant_data_gives_a_zero_width_interval() -> None:
    iv = mean_interval([0.4] * 7)
    assert (iv.estimate, iv.low, iv.high, iv.n) == (pytest.approx(0.4), 0.4, 0.4, 7)
    # not a shortcut only: every resample of constant data has that mean
    assert np.allclose(bootstrap_means([0.4] * 7, n_resamples=50), 0.4)
    same = paired_difference_interval([0.5, 1.0, 0.25], [0.25, 0.75, 0.0])  # every query +0.25
    assert (same.low, same.high) == (0.25, 0.25) and same.excludes_zero


def test_a_two_valued_sample_spans_its_extremes_when_each_is_likely() -> None:
    # n = 3 values {1/3, 1/2, 1/2}: a resample of all three 1/3 has probability 1/27 = 3.7 % > 2.5 %, all 1/2
    # 8/27 = 30 % > 2.5 %: the 2.5th and 97.5th percentiles of the resample means are the extremes 1/3 and 1/2.
    iv = mean_interval([1 / 3, 0.5, 0.5])
    assert iv.estimate == pytest.approx(4 / 9)
    assert (iv.low, iv.high) == (pytest.approx(1 / 3), pytest.approx(0.5))
    assert iv.text() == "0.444 [0.333, 0.500]"


def test_agrees_with_a_direct_loop() -> None:
    values = [0.1, 0.9, 0.35, 0.6, 0.0, 1.0, 0.45, 0.8]
    iv = mean_interval(values, seed=7)
    low, high = _loop_interval(values, seed=7)
    assert (iv.low, iv.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    iv90 = mean_interval(values, level=0.9, seed=7)
    low90, high90 = _loop_interval(values, level=0.9, seed=7)
    assert (iv90.low, iv90.high) == (pytest.approx(low90, abs=1e-12), pytest.approx(high90, abs=1e-12))
    assert iv.low < iv90.low < iv.estimate < iv90.high < iv.high


def test_agrees_with_scipy_bootstrap_percentile() -> None:
    stats = pytest.importorskip("scipy.stats")
    values = np.array([0.2, 0.7, 0.4, 0.9, 0.55, 0.1, 0.3, 0.65, 0.8, 0.45])
    iv = mean_interval(values, seed=3)
    ref = stats.bootstrap((values,), np.mean, n_resamples=2000, method="percentile", confidence_level=0.95,
                          random_state=np.random.default_rng(3), vectorized=True)
    assert (iv.low, iv.high) == (pytest.approx(ref.confidence_interval.low, abs=1e-12),
                                 pytest.approx(ref.confidence_interval.high, abs=1e-12))
    # paired: the interval of mean(a) - mean(b) is scipy's of the differences
    a, b = values, values[::-1] * 0.9
    diff = paired_difference_interval(a, b, seed=3)
    ref_d = stats.bootstrap((a - b,), np.mean, n_resamples=2000, method="percentile",
                            random_state=np.random.default_rng(3), vectorized=True)
    assert diff.estimate == pytest.approx(a.mean() - b.mean())
    assert (diff.low, diff.high) == (pytest.approx(ref_d.confidence_interval.low, abs=1e-12),
                                     pytest.approx(ref_d.confidence_interval.high, abs=1e-12))


def test_the_seed_fixes_the_interval() -> None:
    values = list(np.linspace(0, 1, 15) ** 2)
    first, again = mean_interval(values, seed=11), mean_interval(values, seed=11)
    assert first == again
    other = mean_interval(values, seed=12)
    assert (other.low, other.high) != (first.low, first.high)  # another draw, another (close) interval
    assert abs(other.low - first.low) < 0.05 and abs(other.high - first.high) < 0.05


def test_paired_difference_of_hand_computed_queries() -> None:
    # d = {2/3, 1/3, 0}: all-0 and all-2/3 resamples each have probability 1/27 > 2.5 %: [0, 2/3]
    iv = paired_difference_interval([1.0, 5 / 6, 0.5], [1 / 3, 0.5, 0.5])
    assert iv.estimate == pytest.approx(1 / 3)
    assert (iv.low, iv.high) == (pytest.approx(0.0), pytest.approx(2 / 3))
    assert not iv.excludes_zero
    assert iv.text(signed=True) == "+0.333 [0.000, +0.667]"


def test_blocks_do_not_change_the_resample_means(monkeypatch: pytest.MonkeyPatch) -> None:
    import mrag_core.intervals as intervals

    values = np.arange(9, dtype=float) / 8
    whole = bootstrap_means(values, n_resamples=300, seed=5)
    monkeypatch.setattr(intervals, "_BLOCK_VALUES", 20)  # two resamples per block
    assert np.array_equal(bootstrap_means(values, n_resamples=300, seed=5), whole)


def test_too_few_or_bad_values() -> None:
    one = mean_interval([0.7])
    assert one.estimate == 0.7 and math.isnan(one.low) and not one.defined and one.text() == "0.700"
    none = mean_interval([])
    assert none.n == 0 and math.isnan(none.estimate) and none.text() == ""
    with pytest.raises(ValueError, match="same number of queries"):
        paired_difference_interval([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        mean_interval([0.1, float("nan")])
    with pytest.raises(ValueError, match="level"):
        mean_interval([0.1, 0.2], level=95)
    assert Interval(0.0, -0.0001, 0.0002, 2).bounds_text(signed=True) == "[0.000, 0.000]"
