"""Agreement between annotators on nominal labels, computed with well-kept libraries, never hand-written formulas.

- :func:`cohen`: Cohen's kappa of two annotators over the items both labelled (scikit-learn's
  ``cohen_kappa_score``): kappa = (p_o - p_e) / (1 - p_e), p_o the share of items they gave the same label,
  p_e the chance of that from each annotator's own label shares.
- :func:`fleiss`: Fleiss' kappa of items that each got the same number m >= 2 of labels, from any annotators
  (statsmodels' ``aggregate_raters`` + ``fleiss_kappa``): kappa = (P - P_e) / (1 - P_e), P the mean share of
  agreeing label pairs per item, P_e the sum of squared overall label shares.
- :func:`krippendorff_alpha`: Krippendorff's alpha (nominal) of items labelled by any number of annotators, the
  items with fewer than two labels left out (the ``krippendorff`` package): alpha = 1 - D_o / D_e.
- ``*_per_category``: the same statistic for one category against the rest (labels folded to "c" / "not c").

Every figure says how many items it rests on. A figure that does not exist (no item to compare, or chance
agreement of 100%: every label the same) is ``None`` with a ``note`` saying why, never NaN.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Figure", "cohen", "cohen_per_category", "fleiss", "fleiss_per_category", "krippendorff_alpha",
           "raw_agreement"]


@dataclass(frozen=True)
class Figure:
    """One agreement statistic: ``value`` (None when it does not exist: ``note`` says why), the number of items
    ``n`` it rests on, and ``observed``: the share of those items whose labels all agree (None without items)."""

    value: float | None
    n: int
    observed: float | None
    note: str = ""


def raw_agreement(items: Sequence[Sequence[str]]) -> float | None:
    """Share of ``items`` (each the labels one item got) whose labels are all the same; None without items."""
    return sum(len(set(labels)) == 1 for labels in items) / len(items) if items else None


def _single_label_note(labels: set[str], n: int, what: str) -> str:
    (only,) = labels
    return (f"every label on the {n} {what} is {only!r}: chance agreement is 100%, so kappa does not exist "
            "(raw agreement is 100%)")


def cohen(a: Sequence[str], b: Sequence[str]) -> Figure:
    """Cohen's kappa of two annotators' labels of the same items (``a[i]`` and ``b[i]`` label item ``i``)."""
    from sklearn.metrics import cohen_kappa_score

    if len(a) != len(b):
        raise ValueError(f"the two annotators' label lists differ in length ({len(a)} and {len(b)}).")
    n = len(a)
    if n == 0:
        return Figure(None, 0, None, "no document was labelled by both")
    observed = raw_agreement(list(zip(a, b)))
    labels = set(a) | set(b)
    if len(labels) == 1:
        return Figure(None, n, observed, _single_label_note(labels, n, "documents both labelled"))
    return Figure(float(cohen_kappa_score(list(a), list(b))), n, observed)


def _one_vs_rest(labels: Sequence[str], category: str) -> list[str]:
    return [category if x == category else "other" for x in labels]


def cohen_per_category(a: Sequence[str], b: Sequence[str], categories: Sequence[str]) -> dict[str, Figure]:
    """:func:`cohen` of each category against the rest (both annotators' labels folded to it / not it)."""
    out: dict[str, Figure] = {}
    for category in categories:
        if a and category not in a and category not in b:
            out[category] = Figure(None, len(a), 1.0, "neither annotator used it on these documents")
            continue
        figure = cohen(_one_vs_rest(a, category), _one_vs_rest(b, category))
        if figure.value is None and len(a):
            figure = Figure(None, figure.n, figure.observed, "both annotators gave it to every one of these documents")
        out[category] = figure
    return out


def _equal_count_items(items: Sequence[Sequence[str]]) -> tuple[list[Sequence[str]], int, str]:
    """The items Fleiss' kappa can use (it needs the same number of labels on each): those with the most common
    count of two or more labels (the larger count on a tie); that count; a note on the items left out."""
    counts = Counter(len(labels) for labels in items if len(labels) >= 2)
    if not counts:
        return [], 0, ""
    m = max(counts, key=lambda c: (counts[c], c))
    kept = [labels for labels in items if len(labels) == m]
    left = sum(n for c, n in counts.items() if c != m)
    note = (f"over the documents with {m} labels each; {left} document{'s' if left != 1 else ''} with another "
            "number of labels left out (Krippendorff's alpha counts them)" if left else "")
    return kept, m, note


def fleiss(items: Sequence[Sequence[str]]) -> Figure:
    """Fleiss' kappa of ``items`` (each the labels one item got, from any annotators): over the items with the
    most common number m >= 2 of labels (Fleiss' kappa needs the same number on each); the note says which."""
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    kept, m, note = _equal_count_items(items)
    if not kept:
        return Figure(None, 0, None, "no document was labelled by two annotators or more")
    observed = raw_agreement(kept)
    labels = sorted({x for item in kept for x in item})
    if len(labels) == 1:
        return Figure(None, len(kept), observed, _single_label_note(set(labels), len(kept), "documents compared"))
    code = {x: i for i, x in enumerate(labels)}
    table, _ = aggregate_raters(np.array([[code[x] for x in item] for item in kept]), n_cat=len(labels))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a division by zero must not pass as a number
        value = float(fleiss_kappa(table, method="fleiss"))
    return Figure(value, len(kept), observed, note)


def fleiss_per_category(items: Sequence[Sequence[str]], categories: Sequence[str]) -> dict[str, Figure]:
    """:func:`fleiss` of each category against the rest, over the same items."""
    kept, _, _ = _equal_count_items(items)
    out: dict[str, Figure] = {}
    for category in categories:
        used = any(category in item for item in kept)
        if kept and not used:
            out[category] = Figure(None, len(kept), 1.0, "no annotator used it on these documents")
            continue
        figure = fleiss([_one_vs_rest(item, category) for item in kept])
        if figure.value is None and kept:
            figure = Figure(None, figure.n, figure.observed, "every annotator gave it to every one of these documents")
        out[category] = figure
    return out


def krippendorff_alpha(items: Sequence[Sequence[str]]) -> Figure:
    """Krippendorff's alpha (nominal) of ``items`` (each the labels one item got; any number of annotators per
    item): the items with at least two labels count."""
    import krippendorff

    pairable = [item for item in items if len(item) >= 2]
    if not pairable:
        return Figure(None, 0, None, "no document was labelled by two annotators or more")
    observed = raw_agreement(pairable)
    labels = sorted({x for item in pairable for x in item})
    if len(labels) == 1:
        (only,) = labels
        return Figure(None, len(pairable), observed, f"every label on the {len(pairable)} documents compared is "
                      f"{only!r}: there is no disagreement to expect, so alpha does not exist (raw agreement is 100%)")
    code = {x: i for i, x in enumerate(labels)}
    # value counts: one row per item, one column per label (how many annotators gave it the label)
    counts = np.zeros((len(pairable), len(labels)), dtype=int)
    for row, item in enumerate(pairable):
        for x in item:
            counts[row, code[x]] += 1
    value = float(krippendorff.alpha(value_counts=counts, level_of_measurement="nominal"))
    return Figure(value, len(pairable), observed)
