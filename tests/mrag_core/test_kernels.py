"""The compiled top-c and vote kernels against hand-worked cases and their NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

from mrag_core import kernels
from mrag_core.kernels import sum_rank_votes, sum_votes, sum_votes_reference, top_c_rows, top_c_rows_reference


def test_numba_is_used_here() -> None:
    # umap-learn brings numba; without it the references run and these tests would compare a function with itself
    assert kernels.HAVE_NUMBA


def test_top_c_hand_worked() -> None:
    scores = np.array([[0.1, 0.9, 0.5, 0.9, 0.2],
                       [3.0, 1.0, 2.0, 0.0, -1.0]], np.float32)
    ids, vals = top_c_rows(scores, 3)
    assert ids.tolist() == [[1, 3, 2], [0, 2, 1]]  # 0.9 twice: the smaller id first
    np.testing.assert_array_equal(vals, np.array([[0.9, 0.9, 0.5], [3.0, 2.0, 1.0]], np.float32))


def test_ties_keep_the_smaller_ids_across_the_heap_boundary() -> None:
    row = np.array([[1.0, 1.0, 1.0, 1.0, 2.0, 1.0]], np.float32)
    ids, vals = top_c_rows(row, 3)
    assert ids.tolist() == [[4, 0, 1]]
    assert vals.tolist() == [[2.0, 1.0, 1.0]]


@pytest.mark.parametrize("c", [1, 5, 32, 200, 500])
def test_top_c_equals_the_stable_sort_reference(c: int) -> None:
    rng = np.random.default_rng(c)
    scores = rng.integers(0, 40, size=(7, 200)).astype(np.float32)  # many ties
    ids, vals = top_c_rows(scores, c)
    ref_ids, ref_vals = top_c_rows_reference(scores, c)
    assert ids.shape == (7, min(c, 200))
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_array_equal(vals, ref_vals)


def test_top_c_on_continuous_scores_matches_torch_topk() -> None:
    import torch

    scores = np.random.default_rng(1).standard_normal((12, 5000)).astype(np.float32)
    ids, vals = top_c_rows(scores, 32)
    top = torch.topk(torch.from_numpy(scores), 32, dim=1)
    np.testing.assert_array_equal(ids, top.indices.numpy())
    np.testing.assert_array_equal(vals, top.values.numpy())


def test_top_c_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="2-D"):
        top_c_rows(np.zeros(5, np.float32), 2)


@pytest.mark.parametrize("n", [64, 511, 512, 513, 1000, 1024, 1279, 4099, 10_000])
@pytest.mark.parametrize("c", [1, 3, 16, 32])
def test_top_c_is_exact_with_ties_at_many_sizes(n: int, c: int) -> None:
    """Few distinct values so that ties decide the boundary; the best values at the end of a row,
    a row of equal values (-> the c smallest ids), and the best values spread at a stride."""
    rng = np.random.default_rng(n * 100 + c)
    scores = rng.integers(0, 7, size=(5, n)).astype(np.float32)
    scores[1, -(n % 16 or 1):] = 9.0  # row 1: the maxima sit in the tail
    scores[2] = 3.0  # row 2: all equal -> the c smallest ids
    scores[3, ::16] = 8.0  # row 3: one group holds many of the best
    scores[4, 5::256] = 8.5  # row 4: one strided group of the seeded path holds all of the best
    ids, vals = top_c_rows(scores, c)
    ref_ids, ref_vals = top_c_rows_reference(scores, c)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_array_equal(vals, ref_vals)
    assert ids[2].tolist() == list(range(min(c, n)))


def test_seeded_threshold_never_drops_a_winner() -> None:
    """The seeded kernel (threshold = c-th largest strided-group maximum) against the reference on
    rows built to stress the threshold: -inf entries, best values in the tail after the last full
    group, a single value repeated, and sorted rows (each group's maximum sits in the last block)."""
    rng = np.random.default_rng(11)
    n, c = 3000, 32
    rows = [rng.standard_normal(n), np.sort(rng.standard_normal(n)), np.full(n, 2.0),
            np.where(rng.random(n) < 0.5, -np.inf, rng.standard_normal(n))]
    tail = rng.standard_normal(n)
    tail[-(n % 256):] = 50.0  # 184 entries past the last full group, all winners
    rows.append(tail)
    scores = np.asarray(rows, np.float32)
    assert kernels.HAVE_NUMBA
    ids, vals = kernels._top_c_rows(scores, c, 256, 32)
    ref_ids, ref_vals = top_c_rows_reference(scores, c)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_array_equal(vals, ref_vals)
    ids2, _ = top_c_rows(scores, c)  # the public function takes the seeded path here
    np.testing.assert_array_equal(ids2, ref_ids)
    plain = kernels._top_c_rows(scores, c, 0, 32)  # and the unseeded heap agrees
    np.testing.assert_array_equal(plain[0], ref_ids)


def test_seed_threshold_keeps_at_least_c_and_sits_just_below_the_c_th_largest() -> None:
    # the bisection's t must never exclude a winner (at least c values >= t) and, after 12 halvings
    # of [min, max], lie within (max - min) / 2^12 below the c-th largest
    assert kernels.HAVE_NUMBA
    rng = np.random.default_rng(13)
    cases = [rng.standard_normal(256), rng.integers(0, 4, 256).astype(float), np.full(256, 0.5),
             np.linspace(-1.0, 1.0, 256)]
    for gm in (np.asarray(g, np.float32) for g in cases):
        for c in (1, 2, 32, 128, 256):
            t = kernels._seed_threshold(gm, c)
            kth = np.sort(gm)[::-1][c - 1]
            assert (gm >= t).sum() >= c
            assert kth - (gm.max() - gm.min()) / 2 ** 12 <= t <= kth


def test_seeded_kernel_ranks_heavy_ties_as_the_reference() -> None:
    # a few distinct values: ties at the threshold and at the c-th place, which the insertion must
    # break by the smaller id (equal scores keep arrival order and never displace the c-th)
    rng = np.random.default_rng(14)
    scores = rng.integers(0, 5, (4, 3000)).astype(np.float32)
    scores[1, ::7] = 9.0  # 429 ties for the top
    for c in (1, 8, 32, 100):
        ids, vals = kernels._top_c_rows(scores, c, 256, 32)
        ref_ids, ref_vals = top_c_rows_reference(scores, c)
        np.testing.assert_array_equal(ids, ref_ids)
        np.testing.assert_array_equal(vals, ref_vals)


def test_seeded_kernel_falls_back_to_the_plain_heap_without_enough_candidates() -> None:
    # NaN group maxima give no threshold to compare with: fewer than c candidates, so the row takes
    # the plain heap instead of reading past its candidates (NaN scores are rejected upstream)
    row = np.random.default_rng(12).standard_normal(2048).astype(np.float32)
    scores = np.stack([row, row])
    scores[1, :256] = np.nan
    ids, _ = kernels._top_c_rows(scores, 8, 256, 32)
    assert ids.shape == (2, 8) and ((ids >= 0) & (ids < 2048)).all()
    assert ids[0].tolist() == top_c_rows_reference(scores[:1], 8)[0][0].tolist()


def test_sum_votes_hand_worked() -> None:
    # space 0 ranks docs 7, 3; space 1 ranks 3, 9; space 2 has one hit, 7, and a missing one (-1)
    ids = np.array([[7, 3], [3, 9], [7, -1]])
    w = np.array([[1.0, 0.5], [0.8, 0.4], [0.25, 100.0]])
    docs, totals = sum_votes(ids, w, 3)
    # 3: 0.5 + 0.8 = 1.3; 7: 1.0 + 0.25 = 1.25; 9: 0.4; the -1 hit's 100 votes are ignored
    assert docs.tolist() == [3, 7, 9]
    np.testing.assert_allclose(totals, [1.3, 1.25, 0.4])
    docs, _ = sum_votes(ids, w, 1)
    assert docs.tolist() == [3]


def test_sum_votes_ties_by_smaller_id() -> None:
    docs, totals = sum_votes(np.array([[5, 2, 9]]), np.array([[1.0, 1.0, 1.0]]), 3)
    assert docs.tolist() == [2, 5, 9]
    assert totals.tolist() == [1.0, 1.0, 1.0]


def test_sum_votes_equals_the_bincount_reference_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        ids = rng.integers(-1, 60, size=(12, 32))
        w = rng.random((12, 32)) * np.exp2(-np.arange(32))
        docs, totals = sum_votes(ids, w, 32)
        ref_docs, ref_totals = sum_votes_reference(ids, w, 32)
        np.testing.assert_array_equal(docs, ref_docs)
        np.testing.assert_array_equal(totals, ref_totals)


def test_sum_votes_more_k_than_documents_and_heavy_ties() -> None:
    rng = np.random.default_rng(5)
    for trial in range(200):
        m = int(rng.integers(1, 400))
        ids = rng.integers(-1, int(rng.integers(1, 300)), m)
        w = np.round(rng.random(m), 1)  # few distinct weights: many equal totals
        k = int(rng.integers(0, 60))
        docs, totals = sum_votes(ids, w, k)
        ref_docs, ref_totals = sum_votes_reference(ids, w, k)
        np.testing.assert_array_equal(docs, ref_docs, err_msg=f"trial {trial}")
        np.testing.assert_array_equal(totals, ref_totals, err_msg=f"trial {trial}")


def test_sum_votes_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="differ in shape"):
        sum_votes(np.array([1, 2]), np.array([1.0]), 1)


def test_sum_rank_votes_hand_worked_and_shape_check() -> None:
    # space 0 (scale 2) ranks 7, 3; space 1 (scale 1) ranks 3, 9: 3 gets 2*0.5 + 1 = 2, 7 gets 2, 9 gets 0.5
    docs, totals = sum_rank_votes(np.array([[7, 3], [3, 9]]), np.array([2.0, 1.0]), 3)
    assert docs.tolist() == [3, 7, 9]  # 3 and 7 tie at 2.0: the smaller id first
    assert totals.tolist() == [2.0, 2.0, 0.5]
    with pytest.raises(ValueError, match="one scale per space"):
        sum_rank_votes(np.array([[1, 2]]), np.ones(3), 1)
