"""Tests for mrag_core.rrf.reciprocal_rank_fusion, the one RRF (hand-worked arithmetic)."""

from __future__ import annotations

import pytest

from mrag_core.rrf import reciprocal_rank_fusion


def test_hand_worked_example_k60() -> None:
    # L1 = [a, b, c], L2 = [b, d, a], k = 60, ranks from 1:
    # a: 1/61 + 1/63 = 0.0163934 + 0.0158730 = 0.0322665
    # b: 1/62 + 1/61 = 0.0161290 + 0.0163934 = 0.0325225
    # c: 1/63        = 0.0158730
    # d: 1/62        = 0.0161290
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "d", "a"]])
    assert [doc for doc, _ in fused] == ["b", "a", "d", "c"]
    assert [score for _, score in fused] == pytest.approx([0.0325225, 0.0322665, 0.0161290, 0.0158730], abs=1e-7)


def test_ties_broken_by_first_appearance() -> None:
    # k = 0: x = 1/1 + 1/2 = 1.5, y = 1/2 + 1/1 = 1.5 -> tie; x is met first (list 1, rank 1).
    assert reciprocal_rank_fusion([["x", "y"], ["y", "x"]], k=0) == [("x", 1.5), ("y", 1.5)]
    # p and q both score 1/61; p appears in the first list.
    assert [d for d, _ in reciprocal_rank_fusion([["p"], ["q"]])] == ["p", "q"]
    assert [d for d, _ in reciprocal_rank_fusion([["q"], ["p"]])] == ["q", "p"]


def test_duplicates_count_once_at_their_best_rank() -> None:
    # [a, a, b]: a at rank 1 only (1/61); b keeps its position, rank 3 (1/63).
    assert reciprocal_rank_fusion([[1, 1, 2]]) == [(1, pytest.approx(1 / 61)), (2, pytest.approx(1 / 63))]


def test_empty_and_invalid() -> None:
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []
    with pytest.raises(ValueError, match="k must be >= 0"):
        reciprocal_rank_fusion([["a"]], k=-1)
