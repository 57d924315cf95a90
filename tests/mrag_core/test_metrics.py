"""Metrics: the paper's worked weighted example (R and G built explicitly), recall, MRR, nDCG by hand."""

from __future__ import annotations

import math

import pytest

from mrag_core.evaluation import set_ratios
from mrag_core.metrics import (
    category_success_ratio,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
    retrieval_success_ratio,
    weighted_success_ratio,
)
from mrag_core.metrics.retrieval_success import grouped_success_ratio

# Ground truth: 10 documents g0..g9, one per category c0..c9. Other documents o<j> share category c<j>.
G = [f"g{i}" for i in range(10)]
LABEL = {**{f"g{i}": f"c{i}" for i in range(10)}, **{f"o{i}": f"c{i}" for i in range(10)}, "x": "other"}


def _cats(docs):
    return [LABEL[d] for d in docs]


def test_paper_example_2_of_10_and_3_of_10() -> None:
    # R: exact hits g0, g1; o2 hits only category c2; x hits nothing -> 2 docs, 3 categories
    R = ["g0", "g1", "o2", "x"]
    rsr = retrieval_success_ratio(R, G)
    csr = category_success_ratio(_cats(R), _cats(G))
    assert (rsr, csr) == (0.2, 0.3)
    assert weighted_success_ratio(rsr, csr) == pytest.approx(0.2333, abs=1e-4)
    assert weighted_success_ratio(rsr, csr) == pytest.approx((2 * 0.2 + 0.3) / 3)


def test_paper_example_5_of_10_and_7_of_10() -> None:
    # exact g0..g4 (5 docs, 5 categories) + o5, o6 (categories only) + a second c0 document (counted once)
    R = ["g0", "g1", "g2", "g3", "g4", "o5", "o6", "o0"]
    rsr = retrieval_success_ratio(R, G)
    csr = category_success_ratio(_cats(R), _cats(G))
    assert (rsr, csr) == (0.5, 0.7)
    assert weighted_success_ratio(rsr, csr) == pytest.approx(0.5667, abs=1e-4)


def test_evaluation_set_ratios_agree_with_metric_modules() -> None:
    docs = G + [f"o{i}" for i in range(10)] + ["x"]
    idx = {d: i for i, d in enumerate(docs)}
    labels = [LABEL[d] for d in docs]
    R = ["g0", "g1", "o2", "x"]
    assert set_ratios([idx[d] for d in R], [idx[g] for g in G], labels) == pytest.approx((0.2, 0.3))


def test_weighted_weight_choices() -> None:
    assert weighted_success_ratio(0.2, 0.3, w=0) == pytest.approx(0.3)
    assert weighted_success_ratio(0.2, 0.3, w=1) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        weighted_success_ratio(0.2, 0.3, w=-1)


def test_empty_ground_truth() -> None:
    assert retrieval_success_ratio(["a"], []) == 0.0
    assert category_success_ratio(["a"], []) == 0.0
    assert recall_at_k(["a"], [], 3) == 0.0
    assert ndcg_at_k(["a"], [], 3) == 0.0


def test_grouped_success_ratio() -> None:
    groups = [[1, 2], [3, 4], [5]]
    assert grouped_success_ratio([2, 9], groups) == pytest.approx(1 / 3)
    assert grouped_success_ratio([1, 2, 4], groups) == pytest.approx(2 / 3)  # two hits in one group count once
    assert grouped_success_ratio([1], []) == 0.0


def test_recall_hand_computed() -> None:
    ranking = [3, 1, 4, 1, 5]
    assert recall_at_k(ranking, [1, 5, 9], 1) == 0.0
    assert recall_at_k(ranking, [1, 5, 9], 3) == pytest.approx(1 / 3)
    assert recall_at_k(ranking, [1, 5, 9], 5) == pytest.approx(2 / 3)
    assert recall_at_k(ranking, [1, 5, 9], 50) == pytest.approx(2 / 3)


def test_reciprocal_rank_hand_computed() -> None:
    assert reciprocal_rank(["x", "a", "b"], ["a", "b"]) == 0.5
    assert reciprocal_rank(["x", "y", "b"], ["a", "b"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "a"], ["a"], k=1) == 0.0
    assert reciprocal_rank(["x"], ["a"]) == 0.0
    assert reciprocal_rank(["a"], ["a"], k=0) == 0.0  # an empty cut-off finds nothing


def test_ndcg_hand_computed() -> None:
    # hits at ranks 1 and 3 of 3; three relevant documents
    dcg = 1.0 + 1.0 / math.log2(4)
    idcg = 1.0 + 1.0 / math.log2(3) + 1.0 / math.log2(4)
    assert ndcg_at_k(["a", "x", "b"], ["a", "b", "c"], 3) == pytest.approx(dcg / idcg)
    # k = 2 with two relevant: a hit only at rank 2 -> (1/log2 3) / (1 + 1/log2 3)
    assert ndcg_at_k(["x", "a", "b"], ["a", "b"], 2) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["a", "b"], ["a", "b"], 5) == pytest.approx(1.0)  # ideal list: nDCG 1
    assert ndcg_at_k(["a"], ["a"], 0) == 0.0


def test_prefix_ratios_equal_the_set_ratio_of_every_prefix():
    """The one-pass prefix forms give, for every k, the set formula on ranking[:k] (hand values first)."""
    import numpy as np

    from mrag_core.metrics import (
        category_success_prefix,
        category_success_ratio,
        retrieval_success_prefix,
        retrieval_success_ratio,
    )

    # ranking a, x, b, a, y against G = {a, b, c}: hits at k = 1 and 3 (a repeated counts once)
    assert retrieval_success_prefix(["a", "x", "b", "a", "y"], ["a", "b", "c"], 6).tolist() == pytest.approx(
        [1 / 3, 1 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3])
    assert category_success_prefix(["p", "q", "p", "r"], ["p", "r"], 4).tolist() == [0.5, 0.5, 0.5, 1.0]
    assert retrieval_success_prefix(["a"], [], 2).tolist() == [0.0, 0.0]
    rng = np.random.default_rng(0)
    for _ in range(50):
        ranking = rng.integers(0, 12, size=int(rng.integers(0, 10))).tolist()
        relevant = rng.integers(0, 12, size=3).tolist()
        for k, value in enumerate(retrieval_success_prefix(ranking, relevant, 10), start=1):
            assert value == pytest.approx(retrieval_success_ratio(ranking[:k], relevant))
        labels = [d % 4 for d in ranking]
        for k, value in enumerate(category_success_prefix(labels, [d % 4 for d in relevant], 10), start=1):
            assert value == pytest.approx(category_success_ratio(labels[:k], [d % 4 for d in relevant]))
