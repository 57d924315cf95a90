"""Vote arithmetic (importance / decay / distance) and Reciprocal Rank Fusion, worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from mrag_core.rrf import reciprocal_rank_fusion
from mrag_core.voting import RRF_K, hit_weights, similarity_to_distance, vote, vote_hits

IDS = np.array([[5, 7, 9], [7, 5, 3]])
SCORES = np.zeros((2, 3))  # only the distance vote reads the scores


def test_importance_vote_hand_worked() -> None:
    w = hit_weights(np.array([2.0, 1.0]), SCORES, "importance")
    np.testing.assert_allclose(w, [[2, 1, 0.5], [1, 0.5, 0.25]])
    res = vote(IDS, w, k=10)
    # 5: 2 + 0.5 = 2.5; 7: 1 + 1 = 2; 9: 0.5; 3: 0.25
    assert res.doc_ids.tolist() == [5, 7, 9, 3]
    np.testing.assert_allclose(res.scores, [2.5, 2.0, 0.5, 0.25])
    assert res.evidence[5] == [(0, 0, 2.0), (1, 1, 0.5)]
    assert res.evidence[7] == [(0, 1, 1.0), (1, 0, 1.0)]
    assert res.evidence[9] == [(0, 2, 0.5)]
    assert res.evidence[3] == [(1, 2, 0.25)]


def test_top_k_and_evidence_only_for_returned() -> None:
    w = hit_weights(np.array([2.0, 1.0]), SCORES, "importance")
    res = vote(IDS, w, k=2)
    assert res.doc_ids.tolist() == [5, 7]
    assert set(res.evidence) == {5, 7}
    assert vote(IDS, w, k=2, with_evidence=False).evidence == {}


def test_decay_vote_ties_break_by_smaller_id() -> None:
    w = hit_weights(np.array([2.0, 1.0]), SCORES, "decay")
    np.testing.assert_allclose(w, [[1, 0.5, 0.25], [1, 0.5, 0.25]])
    res = vote(IDS, w, k=4)
    # 5: 1.5, 7: 1.5 (tie -> 5 first), 9: 0.25, 3: 0.25 (tie -> 3 first)
    assert res.doc_ids.tolist() == [5, 7, 3, 9]
    np.testing.assert_allclose(res.scores, [1.5, 1.5, 0.25, 0.25])


def test_distance_vote_uses_inverse_distance_clipped() -> None:
    d = np.array([[0.5, 0.25, 0.0], [1.0, 2.0, 4.0]])
    w = hit_weights(np.array([2.0, 1.0]), 1.0 - d, "distance")  # cosine scores whose distances are d
    np.testing.assert_allclose(w, [[2.0, 4.0, 1e6], [1.0, 0.5, 0.25]])
    res = vote(IDS, w, k=4)
    # 9: 1e6; 7: 4 + 1 = 5; 5: 2 + 0.5 = 2.5; 3: 0.25
    assert res.doc_ids.tolist() == [9, 7, 5, 3]
    np.testing.assert_allclose(res.scores, [1e6, 5.0, 2.5, 0.25])


def test_missing_hits_are_ignored() -> None:
    ids = np.array([[4, -1], [-1, 4]])
    res = vote(ids, np.array([[1.0, 100.0], [100.0, 0.5]]), k=5)
    assert res.doc_ids.tolist() == [4]
    np.testing.assert_allclose(res.scores, [1.5])
    assert res.evidence[4] == [(0, 0, 1.0), (1, 1, 0.5)]


def test_unknown_variant() -> None:
    with pytest.raises(ValueError, match="unknown voting variant"):
        hit_weights(np.ones(2), np.zeros((2, 3)), "borda")


def test_similarity_to_distance() -> None:
    np.testing.assert_allclose(similarity_to_distance(np.array([1.0, 0.25]), "cosine"), [0.0, 0.75])
    np.testing.assert_allclose(similarity_to_distance(np.array([2.0, -1.0]), "ip"), [-2.0, 1.0])
    # the 1/d vote with inner product: d = -ip, clipped at 1e-6
    np.testing.assert_allclose(hit_weights(np.ones(1), np.array([[-0.5, 2.0]]), "distance", "ip"), [[2.0, 1e6]])


def test_hit_weights_hand_worked() -> None:
    scores = np.array([[0.9, 0.5, 0.2], [0.8, 0.7, 1.0]])
    np.testing.assert_allclose(hit_weights(np.array([2.0, 1.0]), scores, "importance"), [[2, 1, 0.5], [1, 0.5, 0.25]])
    # cosine distances 0.1, 0.5, 0.8 / 0.2, 0.3, 0 (clipped at 1e-6)
    np.testing.assert_allclose(hit_weights(np.ones(2), scores, "distance"), [[10, 2, 1.25], [5, 1 / 0.3, 1e6]])


def test_rrf_hand_worked_with_tie_rule() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "a", "d"]])
    assert RRF_K == 60
    # a and b: 1/61 + 1/62 (tie, a seen first); c and d: 1/63 (tie, c seen first)
    assert [d for d, _ in fused] == ["a", "b", "c", "d"]
    np.testing.assert_allclose([s for _, s in fused], [1 / 61 + 1 / 62] * 2 + [1 / 63] * 2)


def test_rrf_order_by_score() -> None:
    fused = reciprocal_rank_fusion([[1, 2, 3], [3, 2, 4], [2]])
    # 1: 1/61; 2: 1/62 + 1/62 + 1/61; 3: 1/63 + 1/61; 4: 1/63
    assert [d for d, _ in fused] == [2, 3, 1, 4]
    np.testing.assert_allclose([s for _, s in fused], [2 / 62 + 1 / 61, 1 / 63 + 1 / 61, 1 / 61, 1 / 63])
    fused_k1 = reciprocal_rank_fusion([[1, 2]], k=1)
    np.testing.assert_allclose([s for _, s in fused_k1], [1 / 2, 1 / 3])
    assert reciprocal_rank_fusion([]) == []


@pytest.mark.parametrize("variant", ["importance", "decay", "distance"])
def test_vote_hits_compiled_path_equals_weights_then_vote(variant: str) -> None:
    """Without evidence the importance/decay votes take one compiled call; totals must be the same
    numbers, bit for bit, as building the weights and summing them, ties included."""
    rng = np.random.default_rng(9)
    for _ in range(50):
        ids = rng.integers(-1, 40, (12, 32))
        scores = np.sort(rng.uniform(-1, 1, (12, 32)), axis=1)[:, ::-1].astype(np.float32)
        imp = rng.choice([0.5, 1.0, 1.5], 12)  # repeated importances: equal totals happen
        fast = vote_hits(ids, scores, imp, variant, 10, with_evidence=False)
        slow = vote(ids, hit_weights(imp, scores, variant), 10, with_evidence=False)
        np.testing.assert_array_equal(fast.doc_ids, slow.doc_ids)
        np.testing.assert_array_equal(fast.scores, slow.scores)
    with_ev = vote_hits(IDS, np.zeros((2, 3)), np.array([2.0, 1.0]), "importance", 10)
    assert with_ev.evidence[5] == [(0, 0, 2.0), (1, 1, 0.5)]  # the evidence path is the plain vote
