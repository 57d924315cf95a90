"""Paired significance tests between two evaluation runs (or strategies) over the same queries.

For per-query values ``a[i]`` and ``b[i]`` (e.g. the weighted success ratio of query ``i`` at one
k under two runs), with differences ``d[i] = a[i] - b[i]``:

* **paired t-test** (``scipy.stats.ttest_rel``): ``t = mean(d) / (sd(d) / sqrt(n))`` with the
  sample standard deviation (``ddof=1``), two-sided p-value with ``n - 1`` degrees of freedom;
* **Wilcoxon signed-rank** (``scipy.stats.wilcoxon``, zero differences dropped - ``"wilcox"``
  method - two-sided);
* **win / tie / loss**: queries where ``a`` is better, equal (within ``tol``), worse.

Degenerate inputs never raise: when every difference is zero both tests report ``statistic=0``
and ``p=1.0`` (no evidence of a difference); when the differences are all equal and non-zero
(every query differs by the same amount: zero variance) the t-test is undefined - its statistic
and p-value are ``nan`` (no stars, :func:`significance_mark`) and ``note`` says so - while the
Wilcoxon test and win/tie/loss still stand (two queries that each differ by 0.1 are no
overwhelming evidence: ``mean / (0 / sqrt(n))`` would read as ``t = inf``, ``p = 0``); with
fewer than 2 queries the p-values are ``nan`` and ``note`` says why.

Several tests of one comparison (one per aspect count, plus all queries) are a family: :func:`holm_adjust` gives
their Holm-Bonferroni adjusted p-values, which keep the chance of any false "significant" in the family at most the
level (5 %) where the raw p-values would not.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["PairedTest", "holm_adjust", "paired_test", "significance_mark", "win_tie_loss"]

SIGNIFICANCE_LEVELS = ((0.001, "***"), (0.01, "**"), (0.05, "*"))


def significance_mark(p: float) -> str:
    """Conventional stars for a p-value: ``***`` p < 0.001, ``**`` p < 0.01, ``*`` p < 0.05,
    ``n.s.`` otherwise; ``""`` when there is no p-value (nan: fewer than 2 paired queries)."""
    if p is None or math.isnan(p):
        return ""
    for level, mark in SIGNIFICANCE_LEVELS:
        if p < level:
            return mark
    return "n.s."


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values of one family of tests, in the order given.

    With the ``m`` p-values that are numbers sorted ascending, ``p_(1) <= ... <= p_(m)``, the adjusted value of
    ``p_(i)`` is ``max over j <= i of min(1, (m - j + 1) * p_(j))`` (step-down: the running maximum keeps the
    adjusted values in the order of the raw ones). NaN p-values (a test that cannot answer: fewer than 2 queries,
    no variance) stay NaN and do not count in ``m``. E.g. ``[0.01, 0.04, 0.03]`` -> ``[0.03, 0.06, 0.06]``."""
    values = [float(p) if p is not None else math.nan for p in pvalues]
    order = sorted((i for i, p in enumerate(values) if not math.isnan(p)), key=lambda i: values[i])
    m = len(order)
    out = [math.nan] * len(values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * values[i]))
        out[i] = running
    return out


@dataclass(frozen=True)
class PairedTest:
    """Result of :func:`paired_test` (``a`` vs ``b``; positive ``mean_diff`` = ``a`` better)."""

    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    t_statistic: float
    t_pvalue: float
    wilcoxon_statistic: float
    wilcoxon_pvalue: float
    wins: int
    ties: int
    losses: int
    note: str = ""

    def as_dict(self) -> dict[str, float | int | str]:
        return {
            "n": self.n, "mean_a": self.mean_a, "mean_b": self.mean_b, "mean_diff": self.mean_diff,
            "t": self.t_statistic, "t_p": self.t_pvalue, "wilcoxon": self.wilcoxon_statistic,
            "wilcoxon_p": self.wilcoxon_pvalue, "wins": self.wins, "ties": self.ties, "losses": self.losses,
            "note": self.note,
        }


def _arrays(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=float).ravel()
    y = np.asarray(b, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"paired values need the same number of queries, got {x.size} and {y.size}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("paired values must be finite numbers")
    return x, y


def win_tie_loss(a: Sequence[float], b: Sequence[float], tol: float = 1e-9) -> tuple[int, int, int]:
    """``(wins, ties, losses)`` of ``a`` against ``b``: ``a > b + tol``, ``|a - b| <= tol``, ``a < b - tol``."""
    x, y = _arrays(a, b)
    d = x - y
    wins = int((d > tol).sum())
    losses = int((d < -tol).sum())
    return wins, int(d.size - wins - losses), losses


def zero_variance_note(difference: float) -> str:
    """``note`` of a paired test whose queries all differ by the same non-zero ``difference``."""
    return (f"every query differs by the same amount ({difference:+.3f}): the t-test has no variance to test "
            "and gives no p-value; the Wilcoxon test and win/tie/loss still apply")


def paired_test(a: Sequence[float], b: Sequence[float], tol: float = 1e-9) -> PairedTest:
    """Paired t-test, Wilcoxon signed-rank test and win/tie/loss of ``a`` vs ``b`` (see module doc)."""
    from scipy import stats

    x, y = _arrays(a, b)
    n = int(x.size)
    wins, ties, losses = win_tie_loss(x, y, tol)
    # Rounded to 12 decimals: success ratios are fractions j/n, and differences that are equal (2/3 - 1/3 and
    # 1 - 2/3) differ in the last bit; unrounded, Wilcoxon ranked them apart instead of as ties and the t-test
    # saw a tiny variance instead of none.
    d = np.round(x - y, 12)
    d[np.abs(d) <= tol] = 0.0
    mean_a = float(x.mean()) if n else math.nan
    mean_b = float(y.mean()) if n else math.nan
    mean_diff = float(d.mean()) if n else math.nan
    if n < 2:
        return PairedTest(n, mean_a, mean_b, mean_diff, math.nan, math.nan, math.nan, math.nan,
                          wins, ties, losses, note="fewer than 2 paired queries: no test")
    if not d.any():
        return PairedTest(n, mean_a, mean_b, 0.0, 0.0, 1.0, 0.0, 1.0, wins, ties, losses,
                          note="all differences are zero")
    note = ""
    if (d == d[0]).all():  # not d.std() == 0: the mean of three 0.1s is 0.1 + 2e-17, their std 1.7e-17
        t_stat = t_p = math.nan
        note = zero_variance_note(float(d[0]))
    else:
        res = stats.ttest_1samp(d, 0.0)  # = ttest_rel(x, y) on the rounded differences
        t_stat, t_p = float(res.statistic), float(res.pvalue)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small-sample / ties warnings: the p-value is still reported
        w = stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided")
    return PairedTest(n, mean_a, mean_b, mean_diff, t_stat, t_p, float(w.statistic), float(w.pvalue),
                      wins, ties, losses, note)
