"""Search backends: torch (exact), FAISS flat (exact) and HNSW (approximate) over several spaces."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mrag_core.backends import (
    FaissIndex,
    TorchIndex,
    build_index,
    normalize_spaces,
    topk_ties_by_id,
)

torch.set_num_threads(1)


def _brute(x: np.ndarray, q: np.ndarray, depth: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    if metric == "cosine":
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    sims = np.einsum("qsd,nsd->qsn", q.astype(np.float64), x.astype(np.float64))
    ids = np.argsort(-sims, axis=2, kind="stable")[:, :, :depth]
    return ids, np.take_along_axis(sims, ids, axis=2)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(300, 3, 16)).astype(np.float32), rng.normal(size=(7, 3, 16)).astype(np.float32)


@pytest.mark.parametrize("metric", ["cosine", "ip"])
def test_torch_and_faiss_flat_agree_with_brute_force(data, metric: str) -> None:
    x, q = data
    exp_ids, exp_scores = _brute(x, q, 10, metric)
    for index in (build_index(x, "torch", metric, device="cpu"), build_index(x, "faiss-flat", metric)):
        assert (index.n_docs, index.n_spaces, index.metric) == (300, 3, metric)
        hits = index.search(q, 10)
        assert hits.ids.shape == hits.scores.shape == (7, 3, 10)
        assert hits.ids.dtype == np.int64
        np.testing.assert_array_equal(hits.ids, exp_ids)
        np.testing.assert_allclose(hits.scores, exp_scores, rtol=1e-4, atol=1e-4)
        assert np.all(np.diff(hits.scores, axis=2) <= 1e-6)  # best first


def test_exact_backends_agree_on_a_corpus_large_enough_for_the_seeded_top_c() -> None:
    # 3,000 documents: the torch CPU path takes the threshold-seeded top-c (n >= 1,024)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3000, 12, 8)).astype(np.float32)
    q = rng.normal(size=(3, 12, 8)).astype(np.float32)
    exp_ids, exp_scores = _brute(x, q, 32, "cosine")
    for backend in ("torch", "faiss-flat"):
        hits = build_index(x, backend, "cosine", device="cpu").search(q, 32)
        np.testing.assert_array_equal(hits.ids, exp_ids, err_msg=backend)
        np.testing.assert_allclose(hits.scores, exp_scores, rtol=1e-4, atol=1e-4)


def test_cosine_ignores_scale_ip_does_not() -> None:
    x = np.array([[1.0, 0.0], [10.0, 10.0], [0.0, -1.0]], dtype=np.float32)
    q = np.array([[[1.0, 0.2]]], dtype=np.float32)
    cos = TorchIndex(x, "cosine", device="cpu").search(q, 3)
    ip = TorchIndex(x, "ip", device="cpu").search(q, 3)
    assert cos.ids[0, 0].tolist() == [0, 1, 2]  # cos 0.98 > 0.85 > -0.2
    assert ip.ids[0, 0].tolist() == [1, 0, 2]  # ip 12 > 1 > -0.2
    np.testing.assert_allclose(ip.scores[0, 0], [12.0, 1.0, -0.2], rtol=1e-6)
    np.testing.assert_allclose(cos.scores[0, 0, 0], 1 / np.sqrt(1.04), rtol=1e-6)


def test_two_dim_input_is_one_space_and_depth_clamps() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 4)).astype(np.float32)
    for backend in ("torch", "faiss-flat", "faiss-hnsw"):
        index = build_index(x, backend, "cosine", device="cpu")
        assert index.n_spaces == 1
        hits = index.search(x[:2], 50)
        assert hits.ids.shape == (2, 1, 5)
        assert hits.ids[0, 0, 0] == 0 and hits.ids[1, 0, 0] == 1  # a document finds itself first
        assert sorted(hits.ids[0, 0].tolist()) == [0, 1, 2, 3, 4]


def test_hnsw_recall_at_10() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1000, 2, 24)).astype(np.float32)
    q = rng.normal(size=(40, 2, 24)).astype(np.float32)
    exact = FaissIndex(x, "cosine", kind="flat").search(q, 10).ids
    approx = build_index(x, "faiss-hnsw", "cosine").search(q, 10).ids
    recall = np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx.reshape(-1, 10), exact.reshape(-1, 10))])
    assert recall >= 0.9


def test_errors_and_helpers() -> None:
    x = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match="unknown search backend"):
        build_index(x, "annoy")
    with pytest.raises(ValueError, match="unknown metric"):
        build_index(x, "torch", "l2", device="cpu")
    with pytest.raises(ValueError, match="unknown FAISS index kind"):
        FaissIndex(x, kind="ivf")
    n = normalize_spaces(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(n, [[0.6, 0.8], [0.0, 0.0]])
    assert n.dtype == np.float32


def test_non_finite_vectors_are_refused_with_a_clear_message() -> None:
    from mrag_core.backends import build_index

    bad = np.ones((4, 2, 3), np.float32)
    bad[2, 1, 0] = np.nan
    for backend in ("torch", "faiss-flat"):
        with pytest.raises(ValueError, match="NaN or infinite"):
            build_index(bad, backend)
        index = build_index(np.ones((4, 2, 3), np.float32), backend)
        with pytest.raises(ValueError, match="NaN or infinite"):
            index.search(np.full((1, 2, 3), np.inf, np.float32), 2)


def test_topk_ties_by_id_hand_worked() -> None:
    # the GPU selection's key: equal scores by the smaller id, -0.0 equal to 0.0, negatives in order
    scores = torch.tensor([[0.5, 1.0, 0.5, -0.0, 0.0, -1.0, 1.0],
                           [-2.0, -1.0, -3.0, -1.0, -0.5, -2.0, -3.0]])
    ids, vals = topk_ties_by_id(scores, 6)
    assert ids.tolist() == [[1, 6, 0, 2, 3, 4], [4, 1, 3, 0, 5, 2]]
    assert vals.tolist() == [[1.0, 1.0, 0.5, 0.5, 0.0, 0.0], [-0.5, -1.0, -1.0, -2.0, -2.0, -3.0]]
    assert topk_ties_by_id(scores, 3)[0].tolist() == [[1, 6, 0], [4, 1, 3]]  # the cut keeps the smaller ids


def test_topk_ties_by_id_equals_the_cpu_kernel_on_heavy_ties() -> None:
    from mrag_core.kernels import top_c_rows_reference

    rng = np.random.default_rng(15)
    scores = (rng.integers(-4, 5, (3, 5, 700)) * 0.25).astype(np.float32)  # nine values, hundreds of ties each
    for depth in (1, 10, 100, 700):
        ids, vals = topk_ties_by_id(torch.from_numpy(scores), depth)
        ref_ids, ref_vals = top_c_rows_reference(scores.reshape(-1, 700), depth)
        np.testing.assert_array_equal(ids.numpy().reshape(-1, depth), ref_ids)
        np.testing.assert_array_equal(vals.numpy().reshape(-1, depth), ref_vals)


def test_topk_ties_by_id_without_ties_is_plain_topk() -> None:
    # distinct scores take the fast path: the same answer as a stable sort
    scores = torch.from_numpy(np.random.default_rng(16).standard_normal((4, 300)).astype(np.float32))
    for depth in (1, 31, 299, 300):
        ids, vals = topk_ties_by_id(scores, depth)
        order = torch.sort(scores, dim=1, descending=True, stable=True)
        assert torch.equal(ids, order.indices[:, :depth]) and torch.equal(vals, order.values[:, :depth])
