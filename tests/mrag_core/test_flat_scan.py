"""mrag_core.flat_scan: the block layout, the one-pass multi-space scan against its NumPy reference (exact on
integer-valued vectors, where every sum is exact and ties are many), and the faiss-flat backend using it."""

from __future__ import annotations

import numpy as np
import pytest

from mrag_core import kernels
from mrag_core.backends import FaissIndex, build_index
from mrag_core.flat_scan import BLOCK, FlatScan, block_layout, scan_top_c_reference

needs_numba = pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="the compiled scan needs numba")


def _ints(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Small integer values as float32: every dot product is exact, and equal scores are common."""
    return rng.integers(-2, 3, size=shape).astype(np.float32)


def test_block_layout_places_every_number_and_pads_with_zeros() -> None:
    x = np.arange(70 * 2 * 3, dtype=np.float32).reshape(70, 2, 3) + 1  # 70 documents: two blocks, the last short
    out = block_layout(x)
    assert out.shape == (2, 2, 3, BLOCK) and out.ctypes.data % 64 == 0
    for doc in (0, 1, 63, 64, 69):
        for space in range(2):
            for t in range(3):
                assert out[space, doc // BLOCK, t, doc % BLOCK] == x[doc, space, t]
    assert not out[:, 1, :, 70 - BLOCK:].any()  # the padding
    assert out.sum() == x.sum()


def test_reference_on_a_hand_computed_example() -> None:
    # space 0 scores q=(1, 0): docs (2,1), (3,0), (3,5) -> 2, 3, 3: the tie 3/3 goes to the smaller id
    # space 1 scores q=(0, 1): docs (0,-1), (0,4), (0,4) -> -1, 4, 4
    x = np.array([[[2, 1], [0, -1]], [[3, 0], [0, 4]], [[3, 5], [0, 4]]], np.float32)
    ids, scores = scan_top_c_reference(x, np.array([[[1, 0], [0, 1]]], np.float32), 2)
    assert ids.tolist() == [[[1, 2], [1, 2]]]
    assert scores.tolist() == [[[3, 3], [4, 4]]]


@needs_numba
@pytest.mark.parametrize("n, c", [(1000, 10), (3000, 32), (5, 3), (5, 40), (64, 64)])
def test_the_compiled_scan_equals_the_reference_exactly(n: int, c: int) -> None:
    # 3000 >= 4 x 256: the seeded threshold path of the selection; 5: one short block; c > n: n columns
    rng = np.random.default_rng(n + c)
    x, q = _ints(rng, n, 3, 7), _ints(rng, 4, 3, 7)
    got_ids, got_scores = FlatScan(x).search(q, c)
    ref_ids, ref_scores = scan_top_c_reference(x, q, c)
    assert got_ids.shape == (4, 3, min(c, n))
    np.testing.assert_array_equal(got_ids, ref_ids)  # ties included: the smaller id first
    np.testing.assert_array_equal(got_scores, ref_scores)


@needs_numba
def test_float_vectors_agree_with_the_reference_up_to_rounding() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2500, 12, 32)).astype(np.float32)
    q = rng.standard_normal((3, 12, 32)).astype(np.float32)
    ids, scores = FlatScan(x).search(q, 32)
    ref_ids, ref_scores = scan_top_c_reference(x, q, 32)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-5, atol=1e-5)
    assert (ids == ref_ids).mean() > 0.99  # only a near-tie may swap two neighbours
    exact = np.einsum("qsd,qskd->qsk", q, x[ids, np.arange(12)[None, :, None]])  # each returned id's own score
    np.testing.assert_allclose(scores, exact, rtol=1e-5, atol=1e-5)
    assert (np.diff(scores, axis=-1) <= 0).all()


def test_empty_corpus_and_zero_depth() -> None:
    scan = FlatScan(np.zeros((0, 2, 4), np.float32))
    ids, scores = scan.search(np.ones((1, 2, 4), np.float32), 5)
    assert ids.shape == scores.shape == (1, 2, 0)
    ids, _ = FlatScan(np.ones((10, 2, 4), np.float32)).search(np.ones((1, 2, 4), np.float32), 0)
    assert ids.shape == (1, 2, 0)


def test_faiss_flat_scans_several_spaces_in_one_pass_and_answers_as_faiss_per_space() -> None:
    rng = np.random.default_rng(1)
    heads = rng.standard_normal((1500, 12, 32)).astype(np.float32)
    q = rng.standard_normal((5, 12, 32)).astype(np.float32)
    one_pass = build_index(heads, "faiss-flat")
    per_space = FaissIndex(heads, kind="flat", one_pass=False)
    assert isinstance(one_pass, FaissIndex) and one_pass.scan is not None and per_space.scan is None
    a, b = one_pass.search(q, 32), per_space.search(q, 32)
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5, atol=1e-5)
    assert (a.ids == b.ids).mean() > 0.99
    exact = build_index(heads, "torch", device="cpu").search(q, 32)
    assert (a.ids == exact.ids).mean() > 0.99
    assert build_index(heads[:, 0], "faiss-flat").scan is None  # one space (Standard): FAISS itself
