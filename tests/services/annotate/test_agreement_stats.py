"""Agreement statistics (services.annotate.agreement): hand-computed values, textbook examples, and the library
each figure comes from, computed on the same data; degenerate cases give a reason, never NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

from services.annotate.agreement import (
    cohen,
    cohen_per_category,
    fleiss,
    fleiss_per_category,
    krippendorff_alpha,
    raw_agreement,
)

# Two annotators, six documents (s = sport, p = politics, c = cooking):
A = ["s", "s", "p", "p", "c", "c"]
B = ["s", "p", "p", "p", "c", "s"]


def test_cohen_by_hand_and_with_statsmodels() -> None:
    # p_o = 4/6 (documents 1, 3, 4, 5); shares A: s 2, p 2, c 2; B: s 2, p 3, c 1 (of 6)
    # p_e = (2*2 + 2*3 + 2*1) / 36 = 1/3; kappa = (2/3 - 1/3) / (1 - 1/3) = 0.5
    figure = cohen(A, B)
    assert figure.value == pytest.approx(0.5) and figure.n == 6 and figure.observed == pytest.approx(4 / 6)
    from statsmodels.stats.inter_rater import cohens_kappa, to_table

    table, _ = to_table(np.array([[["s", "p", "c"].index(x) for x in pair] for pair in zip(A, B)]))
    assert cohens_kappa(table).kappa == pytest.approx(figure.value)


def test_cohen_textbook_example() -> None:
    """Cohen's kappa's usual worked example: 50 applications, both readers say yes to 20, no to 15, A yes / B no
    5, A no / B yes 10: p_o = 0.7, p_e = 0.5 x 0.6 + 0.5 x 0.4 = 0.5, kappa = 0.4."""
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    figure = cohen(a, b)
    assert (round(figure.value, 10), figure.n, figure.observed) == (0.4, 50, 0.7)


def test_cohen_per_category_one_against_the_rest() -> None:
    # "s" against the rest: A = [1,1,0,0,0,0], B = [1,0,0,0,0,1]; p_o = 4/6; shares 2/6 "s" each
    # p_e = (2*2 + 4*4) / 36 = 5/9; kappa = (6/9 - 5/9) / (4/9) = 0.25
    per = cohen_per_category(A, B, ["s", "p", "c", "unused"])
    assert per["s"].value == pytest.approx(0.25) and per["s"].n == 6
    # "c": A = [0,0,0,0,1,1], B = [0,0,0,0,1,0]; p_o = 5/6; p_e = (2*1 + 4*5)/36 = 11/18; kappa = (15/18-11/18)/(7/18)
    assert per["c"].value == pytest.approx(4 / 7)
    assert per["unused"].value is None and "neither annotator used it" in per["unused"].note


def test_fleiss_by_hand() -> None:
    # three documents, three labels each: [s,s,s], [s,s,p], [p,p,p]
    # P_i = 1, 1/3, 1 -> P = 7/9; shares s 5/9, p 4/9 -> P_e = 41/81; kappa = (63/81 - 41/81) / (40/81) = 0.55
    figure = fleiss([["s", "s", "s"], ["s", "s", "p"], ["p", "p", "p"]])
    assert figure.value == pytest.approx(0.55) and figure.n == 3 and figure.observed == pytest.approx(2 / 3)


def test_fleiss_textbook_example() -> None:
    """Fleiss' kappa's usual worked example: 10 subjects, 14 raters each, 5 categories; P = 0.378,
    P_e = 0.213, kappa = 0.210."""
    counts = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
              [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    items = [[f"c{j}" for j, n in enumerate(row) for _ in range(n)] for row in counts]
    figure = fleiss(items)
    assert round(figure.value, 3) == 0.210 and figure.n == 10


def test_fleiss_uses_the_most_common_label_count_and_says_so() -> None:
    items = [["a", "a"], ["a", "b"], ["b", "b"], ["a", "b", "b"]]
    figure = fleiss(items)
    assert figure.n == 3 and "1 document with another number of labels left out" in figure.note
    assert figure.value == pytest.approx(fleiss(items[:3]).value)
    per = fleiss_per_category(items, ["a", "b", "z"])
    assert per["a"].value == pytest.approx(figure.value)  # two labels: "a" against the rest is the same split
    assert per["z"].value is None and "no annotator used it" in per["z"].note


def test_krippendorff_by_hand() -> None:
    # units [a,a], [a,b], [b,b], [b,b]: coincidences o_aa 2, o_ab = o_ba 1, o_bb 4; n_a 3, n_b 5, n 8
    # D_o = 2/8; D_e = 2 x 3 x 5 / (8 x 7) = 30/56; alpha = 1 - (2/8) / (30/56) = 16/30
    figure = krippendorff_alpha([["a", "a"], ["a", "b"], ["b", "b"], ["b", "b"], ["a"]])
    assert figure.value == pytest.approx(16 / 30) and figure.n == 4  # the single label is not pairable


def test_krippendorff_textbook_example() -> None:
    """Krippendorff's own worked example (nominal, 4 observers, 12 units, missing values): alpha = 0.743."""
    observers = [[1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None], [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
                 [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None], [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]]
    units = [[str(x) for x in unit if x is not None] for unit in zip(*observers)]
    figure = krippendorff_alpha(units)
    assert round(figure.value, 3) == 0.743 and figure.n == 11  # unit 12 has one value only


@pytest.mark.parametrize("compute", [
    lambda: cohen(["x", "x", "x"], ["x", "x", "x"]),
    lambda: fleiss([["x", "x"], ["x", "x"]]),
    lambda: krippendorff_alpha([["x", "x"], ["x", "x", "x"]]),
])
def test_one_label_only_has_no_figure_and_says_why(compute) -> None:
    figure = compute()
    assert figure.value is None and figure.observed == 1.0
    assert "'x'" in figure.note and "does not exist" in figure.note


@pytest.mark.parametrize("figure", [cohen([], []), fleiss([["a"], ["b"]]), krippendorff_alpha([["a"]])])
def test_no_overlap_has_no_figure_and_says_why(figure) -> None:
    assert (figure.value, figure.n, figure.observed) == (None, 0, None)
    assert "labelled by both" in figure.note or "two annotators or more" in figure.note


def test_opposite_single_labels_give_zero_not_nan() -> None:
    figure = cohen(["x", "x"], ["y", "y"])  # p_o = 0, p_e = 0
    assert figure.value == 0.0 and not math.isnan(figure.value)


def test_raw_agreement_and_length_check() -> None:
    assert raw_agreement([["a", "a"], ["a", "b"]]) == 0.5 and raw_agreement([]) is None
    with pytest.raises(ValueError, match="differ in length"):
        cohen(["a"], ["a", "b"])
