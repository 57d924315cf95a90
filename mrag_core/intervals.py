"""Percentile-bootstrap confidence intervals for a mean over queries and for a paired difference of means.

For per-query values ``x_1..x_n`` (e.g. the weighted success ratio of each query at one k), the estimate is the
sample mean ``m = (1/n) sum_i x_i``. Its percentile-bootstrap interval at level ``1 - alpha`` (95 %: alpha = 0.05):

1. draw ``B`` resamples (default 2,000), each ``n`` indices ``i_1..i_n`` uniformly from ``0..n-1`` with
   replacement, from ``numpy.random.default_rng(seed)`` (``rng.integers(0, n, size=(B, n))``, one draw);
2. the mean of each resample, ``m*_b = (1/n) sum_j x_{i_j}``;
3. the interval is ``[q(alpha/2), q(1 - alpha/2)]``, the ``100·alpha/2`` and ``100·(1 - alpha/2)`` percentiles
   of the ``m*_b`` (``numpy.percentile``, linear interpolation between order statistics).

This is what ``scipy.stats.bootstrap(..., method="percentile")`` computes with the same generator and seed.

For two strategies scored on the same queries, ``a_i`` and ``b_i``, the paired difference of means is
``mean(a) - mean(b) = mean(d)`` with ``d_i = a_i - b_i``: resampling the queries (pairs kept together) and taking
the mean of ``d`` per resample gives its interval (:func:`paired_difference_interval`). An interval of a
difference that holds 0 says the data cannot tell which of the two is better at that level.

The bootstrap is deterministic for a given ``seed``. Constant data gives a zero-width interval (every resample
has the same mean). Fewer than 2 values give no interval (``low``/``high`` NaN): one query says nothing about
how much a mean varies. It assumes the queries are a sample of the queries the user cares about; with few
queries (under ~10) the percentile interval is too narrow, so read it as a lower bound on the uncertainty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["DEFAULT_RESAMPLES", "Interval", "bootstrap_means", "mean_interval", "paired_difference_interval"]

DEFAULT_RESAMPLES = 2000
#: Largest number of resampled values held at once (rows of resamples are drawn whole, then averaged in blocks).
_BLOCK_VALUES = 4_000_000


@dataclass(frozen=True)
class Interval:
    """A mean (or mean difference) ``estimate`` over ``n`` values with its bootstrap interval ``[low, high]`` at
    ``level``; ``low``/``high`` are NaN when ``n < 2``."""

    estimate: float
    low: float
    high: float
    n: int
    level: float = 0.95

    @property
    def defined(self) -> bool:
        """Whether there is an interval (at least 2 values)."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def excludes_zero(self) -> bool:
        """The interval lies wholly above or wholly below 0 (for a difference: the data tell the sign)."""
        return self.defined and (self.low > 0.0 or self.high < 0.0)

    def bounds_text(self, digits: int = 3, signed: bool = False) -> str:
        """``[0.412, 0.688]`` (``[-0.050, +0.125]`` when ``signed``); ``""`` without an interval."""
        if not self.defined:
            return ""
        fmt = f"{{:{'+' if signed else ''}.{digits}f}}"
        return f"[{_no_minus_zero(fmt.format(self.low))}, {_no_minus_zero(fmt.format(self.high))}]"

    def text(self, digits: int = 3, signed: bool = False) -> str:
        """``0.550 [0.412, 0.688]``: the estimate and its interval (the estimate alone without one)."""
        fmt = f"{{:{'+' if signed else ''}.{digits}f}}"
        head = _no_minus_zero(fmt.format(self.estimate)) if not math.isnan(self.estimate) else ""
        bounds = self.bounds_text(digits, signed)
        return f"{head} {bounds}".strip()


def _no_minus_zero(text: str) -> str:
    """``-0.000`` / ``+0.000`` -> ``0.000``: a difference that rounds to zero has no sign."""
    return text.lstrip("+-") if float(text) == 0.0 else text


def _values(values: Sequence[float]) -> np.ndarray:
    x = np.asarray(values, dtype=float).ravel()
    if not np.isfinite(x).all():
        raise ValueError("bootstrap values must be finite numbers")
    return x


def bootstrap_means(values: Sequence[float], *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """The ``n_resamples`` resample means ``m*_b`` of ``values`` (module doc, steps 1-2), in draw order."""
    x = _values(values)
    n = int(x.size)
    if n == 0:
        raise ValueError("no values to resample")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))  # one draw, as scipy.stats.bootstrap makes it
    rows = max(1, _BLOCK_VALUES // n)
    out = np.empty(n_resamples, dtype=float)
    for start in range(0, n_resamples, rows):
        out[start:start + rows] = x[idx[start:start + rows]].mean(axis=1)
    return out


def mean_interval(values: Sequence[float], *, level: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES,
                  seed: int = 0) -> Interval:
    """The mean of ``values`` with its percentile-bootstrap interval at ``level`` (module doc)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    x = _values(values)
    n = int(x.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, level)
    estimate = float(x.mean())
    if n < 2:
        return Interval(estimate, math.nan, math.nan, n, level)
    if (x == x[0]).all():  # every resample mean is x[0]; exact, not x[0] plus rounding of a mean of copies
        return Interval(estimate, float(x[0]), float(x[0]), n, level)
    means = bootstrap_means(x, n_resamples=n_resamples, seed=seed)
    alpha = 1.0 - level
    low, high = np.percentile(means, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return Interval(estimate, float(low), float(high), n, level)


def paired_difference_interval(a: Sequence[float], b: Sequence[float], *, level: float = 0.95,
                               n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Interval:
    """``mean(a) - mean(b)`` over paired values (the same queries, in the same order) with the percentile-bootstrap
    interval of the mean of ``d = a - b``, queries resampled as pairs (module doc). Raises ValueError when ``a``
    and ``b`` differ in length."""
    x, y = _values(a), _values(b)
    if x.shape != y.shape:
        raise ValueError(f"paired values need the same number of queries, got {x.size} and {y.size}")
    # Rounded as in mrag_core.significance.paired_test: 2/3 - 1/3 and 1 - 2/3 are the same difference.
    return mean_interval(np.round(x - y, 12), level=level, n_resamples=n_resamples, seed=seed)
