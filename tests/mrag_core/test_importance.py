"""Head importance: a_i (mean norm) * b_i (mean cosine distance of sampled pairs), hand-computed."""

from __future__ import annotations

import numpy as np
import pytest

from mrag_core.importance import HeadImportance, head_importance, mean_cosine_distance, mean_norms, sample_pairs

# 3 documents, 2 spaces, 2 dims.
#   space 0: [3,4] [0,1] [1,0]  -> norms 5, 1, 1   -> a_0 = 7/3
#   space 1: [1,0] [2,0] [0,3]  -> norms 1, 2, 3   -> a_1 = 2
V = np.array([
    [[3, 4], [1, 0]],
    [[0, 1], [2, 0]],
    [[1, 0], [0, 3]],
], dtype=np.float32)


def test_mean_norms_hand_computed() -> None:
    np.testing.assert_allclose(mean_norms(V), [7 / 3, 2.0])


def test_mean_cosine_distance_hand_computed() -> None:
    u = np.array([0, 1, 2])
    v = np.array([1, 2, 0])
    # space 0: cos(e0,e1) = 4/5, cos(e1,e2) = 0, cos(e2,e0) = 3/5 -> distances 0.2, 1, 0.4
    # space 1: cos(e0,e1) = 1,   cos(e1,e2) = 0, cos(e2,e0) = 0   -> distances 0, 1, 1
    np.testing.assert_allclose(mean_cosine_distance(V, u, v), [1.6 / 3, 2 / 3], atol=1e-7)


def test_zero_vector_counts_as_orthogonal() -> None:
    x = np.array([[[0.0, 0.0]], [[1.0, 0.0]]])
    np.testing.assert_allclose(mean_cosine_distance(x, np.array([0]), np.array([1])), [1.0])
    assert not np.isnan(mean_cosine_distance(x, np.array([0]), np.array([0]))).any()


def test_sample_pairs_count_distinct_and_seeded() -> None:
    u, v = sample_pairs(7, 3, seed=5)
    assert u.shape == v.shape == (21,)
    assert u.tolist() == [i for i in range(7) for _ in range(3)]
    assert np.all(u != v)
    assert v.min() >= 0 and v.max() < 7
    u2, v2 = sample_pairs(7, 3, seed=5)
    assert np.array_equal(u, u2) and np.array_equal(v, v2)
    _, v3 = sample_pairs(7, 3, seed=6)
    assert not np.array_equal(v, v3)
    u, v = sample_pairs(2, 4, seed=0)  # with two documents every partner is forced
    assert np.all(v == 1 - u)
    with pytest.raises(ValueError):
        sample_pairs(1, 3, seed=0)


def test_head_importance_two_documents_exact() -> None:
    # with n = 2 the pairs are (0,1) and (1,0): b_i = 1 - cos(e0, e1) exactly
    x = np.array([
        [[3, 4], [1, 0]],
        [[0, 1], [1, 1]],
    ], dtype=np.float64)
    imp = head_importance(x, pairs_per_doc=16, seed=3)
    norm = np.array([(5 + 1) / 2, (1 + np.sqrt(2)) / 2])
    spread = np.array([1 - 4 / 5, 1 - 1 / np.sqrt(2)])
    np.testing.assert_allclose(imp.norm, norm)
    np.testing.assert_allclose(imp.spread, spread, atol=1e-12)
    np.testing.assert_allclose(imp.score, norm * spread, atol=1e-12)


def test_head_importance_is_product_and_scale_sensitive() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 4, 5))
    x[:, 2] *= 10.0  # a louder head: norm x10, same directions
    imp = head_importance(x, pairs_per_doc=8, seed=1)
    np.testing.assert_allclose(imp.score, imp.norm * imp.spread)
    u, v = sample_pairs(30, 8, seed=1)
    np.testing.assert_allclose(imp.spread, mean_cosine_distance(x, u, v))
    np.testing.assert_allclose(imp.norm, np.linalg.norm(x, axis=2).mean(axis=0))
    # identical directions in every document -> spread 0 -> importance 0
    same = np.repeat(rng.normal(size=(1, 2, 3)), 5, axis=0) * np.arange(1, 6)[:, None, None]
    np.testing.assert_allclose(head_importance(same).score, [0, 0], atol=1e-12)


def test_round_trip_dict() -> None:
    imp = head_importance(V, seed=0)
    back = HeadImportance.from_dict(imp.to_dict())
    np.testing.assert_array_equal(back.score, imp.score)
    np.testing.assert_array_equal(back.norm, imp.norm)
    np.testing.assert_array_equal(back.spread, imp.spread)
