"""Retrieval strategies on hand-built indexes (answers worked by hand) and on random data (equivalences)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mrag_core.corpus_index import CorpusIndex, query_arrays
from mrag_core.extraction import Embeddings
from mrag_core.importance import HeadImportance, head_importance
from mrag_core.rrf import reciprocal_rank_fusion
from mrag_core.strategies import (
    fusion_mrag_search,
    fusion_search,
    mrag_search,
    split_hits,
    split_search,
    standard_search,
)
from tests.support.random_embeddings import random_embeddings

torch.set_num_threads(1)


def unit(deg: float) -> list[float]:
    r = np.deg2rad(deg)
    return [float(np.cos(r)), float(np.sin(r))]


def angle_embeddings(space_angles: list[list[float]]) -> Embeddings:
    """Rows = texts; each row gives one angle per head space (2-d unit vectors); standard = concat."""
    heads = np.array([[unit(a) for a in row] for row in space_angles], dtype=np.float32)
    return Embeddings(heads.reshape(len(space_angles), -1).copy(), heads)


# 4 documents, 2 head spaces:
#   space 0 angles: doc0 0, doc1 20, doc2 50, doc3 90   -> a query at 0 ranks 0, 1, 2, 3
#   space 1 angles: doc0 80, doc1 0, doc2 40, doc3 10   -> a query at 0 ranks 1, 3, 2, 0
DOCS = angle_embeddings([[0, 80], [20, 0], [50, 40], [90, 10]])
Q0 = angle_embeddings([[0, 0]])
IMP = HeadImportance(np.ones(2), np.ones(2), np.array([3.0, 1.0]))


@pytest.fixture(scope="module")
def hand_index() -> CorpusIndex:
    return CorpusIndex.build(DOCS, device="cpu", head_importance_override=IMP)


def test_mrag_hand_worked(hand_index: CorpusIndex) -> None:
    # c = 3: space 0 [0,1,2] x 3*(1, .5, .25); space 1 [1,3,2] x 1*(1, .5, .25)
    # totals 0: 3, 1: 1.5 + 1 = 2.5, 2: .75 + .25 = 1, 3: .5
    (r,) = mrag_search(hand_index, Q0, k=4, c=3)
    assert r.strategy == "mrag"
    assert r.doc_ids == [0, 1, 2, 3]
    np.testing.assert_allclose(r.scores, [3.0, 2.5, 1.0, 0.5])
    assert r.space_ids.tolist() == [[0, 1, 2], [1, 3, 2]]
    assert [(h.space, h.rank, h.contribution) for h in r.evidence[1]] == [(0, 1, 1.5), (1, 0, 1.0)]
    # decay: 0: 1, 1: .5 + 1 = 1.5, 2: .25 + .25 = .5, 3: .5 (tie with 2 -> smaller id first)
    (d,) = mrag_search(hand_index, Q0, k=4, c=3, variant="decay")
    assert d.doc_ids == [1, 0, 2, 3]
    np.testing.assert_allclose(d.scores, [1.5, 1.0, 0.5, 0.5])
    # c = 1: only the top document of each space: 0 (3) and 1 (1)
    (one,) = mrag_search(hand_index, Q0, k=4, c=1)
    assert one.doc_ids == [0, 1]
    # k cuts the list
    assert mrag_search(hand_index, Q0, k=2, c=3)[0].doc_ids == [0, 1]


def test_mrag_distance_hand_worked(hand_index: CorpusIndex) -> None:
    # 1 / (1 - cos): exact matches (doc0 in space 0, doc1 in space 1) are clipped to 1e6
    (r,) = mrag_search(hand_index, Q0, k=4, c=3, variant="distance")
    d = lambda deg: 1.0 / (1.0 - np.cos(np.deg2rad(deg)))  # noqa: E731
    assert r.doc_ids == [1, 0, 3, 2]
    np.testing.assert_allclose(r.scores[2:], [d(10), d(50) + d(40)], rtol=1e-3)
    assert r.scores[0] > r.scores[1] >= 1e5


def test_standard_and_split_hand_worked(hand_index: CorpusIndex) -> None:
    # standard cosine = (cos a0 + cos a1) / 2: doc0 .587, doc1 .970, doc2 .704, doc3 .492
    (s,) = standard_search(hand_index, Q0, k=4)
    assert s.doc_ids == [1, 2, 0, 3]
    expected = [(np.cos(np.deg2rad(a)) + np.cos(np.deg2rad(b))) / 2 for a, b in [[20, 0], [50, 40], [0, 80], [90, 10]]]
    np.testing.assert_allclose(s.scores, expected, rtol=1e-5)
    # the split pieces of [cos a0, sin a0, cos a1, sin a1] are the two head spaces here, so Split
    # (decay) gives the decay vote worked above
    (sp,) = split_search(hand_index, Q0, k=4, c=3)
    assert sp.strategy == "split"
    assert sp.doc_ids == [1, 0, 2, 3]
    np.testing.assert_allclose(sp.scores, [1.5, 1.0, 0.5, 0.5])


def test_fusion_hand_worked(hand_index: CorpusIndex) -> None:
    # sub-query 0 at (0, 0): standard ranking [1, 2, 0, 3]
    # sub-query 1 at (90, 90): cos = (sin a0 + sin a1) / 2 -> doc0 .492, doc1 .171, doc2 .704, doc3 .587 -> [2, 3, 0, 1]
    subs = angle_embeddings([[0, 0], [90, 90]])
    r = fusion_search(hand_index, subs, k=4, c=4)
    assert r.sub_rankings == [[1, 2, 0, 3], [2, 3, 0, 1]]
    # RRF: 2: 1/62 + 1/61 = .03252; 1: 1/61 + 1/64 = .03202; 3: 1/64 + 1/62 = .031754; 0: 2/63 = .031746
    assert r.doc_ids == [2, 1, 3, 0]
    np.testing.assert_allclose(r.scores, [1 / 62 + 1 / 61, 1 / 61 + 1 / 64, 1 / 64 + 1 / 62, 2 / 63])
    # depth c = 2: lists [1, 2] and [2, 3]: 2: 1/62 + 1/61, 1: 1/61, 3: 1/62
    assert fusion_search(hand_index, subs, k=3, c=2).doc_ids == [2, 1, 3]
    assert (
        fusion_search(hand_index, Embeddings(np.zeros((0, 4), np.float32), np.zeros((0, 2, 2), np.float32)), 3).doc_ids
        == []
    )


def test_fusion_mrag_hand_worked(hand_index: CorpusIndex) -> None:
    subs = angle_embeddings([[0, 0], [90, 90]])
    # sub-query 0, c = 2: space 0 [0, 1] -> 3, 1.5; space 1 [1, 3] -> 1, .5 -> top 2: [0, 1]
    # sub-query 1, c = 2: space 0 (angles to 90: 90, 70, 40, 0) [3, 2] -> 3, 1.5;
    #                     space 1 (80, 0, 40, 10 -> distances 10, 90, 50, 80) [0, 2] -> 1, .5 -> 3: 3, 2: 2 -> [3, 2]
    r = fusion_mrag_search(hand_index, subs, k=4, c=2)
    assert r.sub_rankings == [[0, 1], [3, 2]]
    # RRF: 0 and 3 tie at 1/61 (0 first seen), 1 and 2 tie at 1/62 (1 first seen)
    assert r.doc_ids == [0, 3, 1, 2]
    np.testing.assert_allclose(r.scores, [1 / 61, 1 / 61, 1 / 62, 1 / 62])


def test_query_arrays_shapes() -> None:
    std, heads, split = query_arrays(Q0)
    assert std.shape == (1, 1, 4) and heads.shape == (1, 2, 2) and split.shape == (1, 2, 2)


# --------------------------------------------------------------------------- random data: equivalences


@pytest.fixture(scope="module")
def random_setup() -> tuple[Embeddings, Embeddings, CorpusIndex]:
    rng = np.random.default_rng(0)
    docs = random_embeddings(rng, 60, 24, 4, 5)
    qs = random_embeddings(rng, 3, 24, 4, 5)
    return docs, qs, CorpusIndex.build(docs, device="cpu", pairs_per_doc=4, seed=1)


def _cos_rank(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    q = q / np.linalg.norm(q)
    return np.argsort(-(x @ q), kind="stable")


def test_importances_are_computed_per_view(random_setup) -> None:
    docs, _, index = random_setup
    np.testing.assert_allclose(index.head_importance.score, head_importance(docs.heads, pairs_per_doc=4, seed=1).score)
    np.testing.assert_allclose(
        index.split_importance.score, head_importance(docs.split(), pairs_per_doc=4, seed=1).score
    )
    assert (index.n_docs, index.n_heads, index.metric) == (60, 4, "cosine")


def test_mrag_evidence_matches_vote_arithmetic(random_setup) -> None:
    docs, qs, index = random_setup
    c, k = 6, 8
    s = index.head_importance.score
    for qi, r in enumerate(mrag_search(index, qs, k=k, c=c)):
        # per-space lists equal brute-force cosine rankings
        for space in range(4):
            assert r.space_ids[space].tolist() == _cos_rank(docs.heads[:, space], qs.heads[qi, space])[:c].tolist()
        # independent vote: sum s_i * 2^-rank over the per-space lists
        totals: dict[int, float] = {}
        for space in range(4):
            for rank, d in enumerate(r.space_ids[space].tolist()):
                totals[d] = totals.get(d, 0.0) + s[space] * 2.0 ** -rank
        best = sorted(totals.items(), key=lambda t: (-t[1], t[0]))[:k]
        assert r.doc_ids == [d for d, _ in best]
        np.testing.assert_allclose(r.scores, [v for _, v in best])
        for doc, score in zip(r.doc_ids, r.scores):
            hits = r.evidence[doc]
            assert len(hits) == int((r.space_ids == doc).sum())
            for h in hits:
                assert r.space_ids[h.space, h.rank] == doc
                assert h.contribution == pytest.approx(s[h.space] * 2.0 ** -h.rank)
            assert sum(h.contribution for h in hits) == pytest.approx(score)


def test_split_uses_pieces_of_the_standard_vector(random_setup) -> None:
    docs, qs, index = random_setup
    hits = split_hits(index, qs, 5)
    for qi in range(len(qs)):
        for piece in range(4):
            sl = slice(piece * 6, (piece + 1) * 6)
            assert hits.ids[qi, piece].tolist() == _cos_rank(docs.standard[:, sl], qs.standard[qi, sl])[:5].tolist()
    r = split_search(index, qs, k=5, c=5, variant="importance")[0]
    s = index.split_importance.score
    for doc, score in zip(r.doc_ids, r.scores):
        assert sum(s[h.space] * 2.0 ** -h.rank for h in r.evidence[doc]) == pytest.approx(score)


def test_standard_and_fusion_on_random_data(random_setup) -> None:
    docs, qs, index = random_setup
    for qi, r in enumerate(standard_search(index, qs, 7)):
        assert r.doc_ids == _cos_rank(docs.standard, qs.standard[qi])[:7].tolist()
    r = fusion_search(index, qs, k=5, c=10)
    lists = [_cos_rank(docs.standard, qs.standard[j])[:10].tolist() for j in range(3)]
    assert r.sub_rankings == lists
    assert r.doc_ids == [d for d, _ in reciprocal_rank_fusion(lists)[:5]]
    fm = fusion_mrag_search(index, qs, k=5, c=6)
    per_sub = [x.doc_ids for x in mrag_search(index, qs, k=6, c=6)]
    assert fm.sub_rankings == per_sub
    assert fm.doc_ids == [d for d, _ in reciprocal_rank_fusion(per_sub)[:5]]
