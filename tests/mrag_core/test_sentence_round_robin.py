"""Sentence round-robin on a hand-computed example: the parts, each part's Standard list and MRAG vote, the
round-robin per view, the RRF of the two views, and the evidence behind a result."""

from __future__ import annotations

import numpy as np
import pytest

from mrag_core.corpus_index import CorpusIndex
from mrag_core.extraction import Embeddings
from mrag_core.importance import HeadImportance
from mrag_core.sentence_round_robin import (
    ALIAS,
    STRATEGY_ID,
    PartHit,
    query_parts,
    round_robin,
    sentence_round_robin,
    sentence_round_robin_many,
)
from mrag_core.strategies import SpaceHit

# Four documents. Standard space: the unit vectors e0..e3. Two heads of two dimensions.
DOC_STD = np.eye(4, dtype=np.float32)
HEAD0 = [[1, 0], [0.8, 0.6], [0.6, 0.8], [0, 1]]
HEAD1 = [[0, 1], [0.6, 0.8], [0.8, 0.6], [1, 0]]
DOC_HEADS = np.stack([np.array(HEAD0), np.array(HEAD1)], axis=1).astype(np.float32)  # [4, 2, 2]
IMPORTANCE = np.array([1.0, 0.6])

# Two parts.
# Part 0: Standard (4,3,2,1) -> cosines rank d0, d1, d2, d3: S0 = [0, 1, 2].
#   head 0 query (0.6, 0.8): cos d2 1.0, d1 .96, d3 .8, d0 .6 -> [2, 1, 3], votes 1, .5, .25
#   head 1 query (0.6, 0.8): cos d1 1.0, d2 .96, d0 .8, d3 .6 -> [1, 2, 0], votes .6, .3, .15
#   totals d2 1.3, d1 1.1, d3 .25, d0 .15 -> M0 = [2, 1, 3]
# Part 1: Standard (1,2,0,4) -> d3, d1, d0, d2: S1 = [3, 1, 0].
#   head 0 query (0, 1): d3 1, d2 .8, d1 .6 -> [3, 2, 1], votes 1, .5, .25
#   head 1 query (0, 1): d0 1, d1 .8, d2 .6 -> [0, 1, 2], votes .6, .3, .15
#   totals d3 1, d2 .65, d0 .6, d1 .55 -> M1 = [3, 2, 0]
PART_STD = np.array([[4, 3, 2, 1], [1, 2, 0, 4]], dtype=np.float32)
PART_HEADS = np.array([[[0.6, 0.8], [0.6, 0.8]], [[0, 1], [0, 1]]], dtype=np.float32)


@pytest.fixture(scope="module")
def index() -> CorpusIndex:
    imp = HeadImportance(norm=np.ones(2), spread=IMPORTANCE, score=IMPORTANCE)
    return CorpusIndex.build(Embeddings(DOC_STD, DOC_HEADS), backend="torch", device="cpu",
                             head_importance_override=imp)


def parts() -> Embeddings:
    return Embeddings(PART_STD, PART_HEADS)


def test_names():
    assert STRATEGY_ID == "sentence-round-robin"
    assert ALIAS == "recommended"


def test_query_parts_are_the_sentences_or_the_whole_text():
    assert query_parts("Dr. Ada Lovelace wrote the notes. The bridge fell in 1940.") == [
        "Dr. Ada Lovelace wrote the notes.", "The bridge fell in 1940."]
    assert query_parts("  lighthouse   keepers ") == ["lighthouse keepers"]
    assert query_parts(" \n ") == []


def test_round_robin_orders_by_best_rank_then_rrf_sum_then_first_appearance():
    # best ranks: d0 0 (list 1), d3 0 (list 2), d1 1, d2 2; rank-0 tie: d0 has 1/61 + 1/63 > d3's 1/61
    assert round_robin([[0, 1, 2], [3, 1, 0]]) == [0, 3, 1, 2]
    # rank-0 tie with equal sums (1/61 + 1/63 each): first appearance decides
    assert round_robin([[0, 1, 3], [3, 2, 0]]) == [0, 3, 1, 2]
    assert round_robin([]) == []


def test_the_parts_lists_views_and_fusion(index):
    res = sentence_round_robin(index, parts(), k=4, c=3, part_texts=["first", "second"])
    # sub-rankings: Standard then MRAG list of each part
    assert res.sub_rankings == [[0, 1, 2], [2, 1, 3], [3, 1, 0], [3, 2, 0]]
    # Standard view: round_robin(S0, S1) = [0, 3, 1, 2]; MRAG view: best ranks d2 0, d3 0, d1 1, d0 2 and the
    # rank-0 tie goes to d2 (1/61 + 1/62 against d3's 1/63 + 1/61): [2, 3, 1, 0].
    # RRF: d3 2/62 = .032258; d0 1/61 + 1/64 = d2 1/64 + 1/61 = .032018 (d0 first: Standard view read first);
    # d1 2/63 = .031746.
    assert res.doc_ids == [3, 0, 2, 1]
    assert res.scores == pytest.approx([2 / 62, 1 / 61 + 1 / 64, 1 / 61 + 1 / 64, 2 / 63])
    assert res.strategy == STRATEGY_ID
    assert res.parts == ["first", "second"]
    assert sentence_round_robin(index, parts(), k=3, c=3).doc_ids == [3, 0, 2]


def test_evidence_names_the_views_parts_and_heads(index):
    res = sentence_round_robin(index, parts(), k=4, c=3)
    assert res.evidence[3] == [SpaceHit(0, 1, pytest.approx(1 / 62)), SpaceHit(1, 1, pytest.approx(1 / 62))]
    assert res.evidence[0] == [SpaceHit(0, 0, pytest.approx(1 / 61)), SpaceHit(1, 3, pytest.approx(1 / 64))]
    assert res.part_evidence[3] == [
        PartHit(0, "mrag", 2, pytest.approx(1 / 63), (SpaceHit(0, 2, 0.25),)),
        PartHit(1, "standard", 0, pytest.approx(1 / 61)),
        PartHit(1, "mrag", 0, pytest.approx(1 / 61), (SpaceHit(0, 0, 1.0),)),
    ]
    d1 = res.part_evidence[1]
    # d1 is 4th in part 1's vote (.55), outside its top c = 3
    assert [(h.part, h.view, h.rank) for h in d1] == [(0, "standard", 1), (0, "mrag", 1), (1, "standard", 1)]
    assert d1[1].heads == (SpaceHit(0, 1, 0.5), SpaceHit(1, 0, pytest.approx(0.6)))


def test_no_parts_gives_an_empty_result(index):
    empty = Embeddings(np.zeros((0, 4), np.float32), np.zeros((0, 2, 2), np.float32))
    res = sentence_round_robin(index, empty, k=4, c=3)
    assert res.doc_ids == [] and res.scores == [] and res.evidence == {}


def test_one_part_fuses_its_standard_and_mrag_lists(index):
    res = sentence_round_robin(index, parts().take([0]), k=4, c=3)
    # S0 = [0, 1, 2], M0 = [2, 1, 3]: d2 1/63 + 1/61 = .032266 > d1 2/62 = .032258 > d0 1/61 > d3 1/63
    assert res.doc_ids == [2, 1, 0, 3]
    assert res.scores == pytest.approx([1 / 63 + 1 / 61, 2 / 62, 1 / 61, 1 / 63])


def test_many_queries_at_once_equal_one_at_a_time(index):
    rng = np.random.default_rng(5)
    all_parts = Embeddings(rng.normal(size=(7, 4)).astype(np.float32), rng.normal(size=(7, 2, 2)).astype(np.float32))
    rows = [[0, 1, 2], [3], [], [4, 5, 6]]
    many = sentence_round_robin_many(index, all_parts, rows, k=4, c=3)
    for r, got in zip(rows, many):
        one = sentence_round_robin(index, all_parts.take(r), k=4, c=3)
        assert got.doc_ids == one.doc_ids
        assert got.scores == one.scores


def test_threads_sharing_one_index_get_the_one_at_a_time_results(index):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(9)
    queries = [Embeddings(rng.normal(size=(m, 4)).astype(np.float32), rng.normal(size=(m, 2, 2)).astype(np.float32))
               for m in (1, 2, 3, 4) * 6]
    alone = [sentence_round_robin(index, q, k=4, c=3) for q in queries]
    with ThreadPoolExecutor(max_workers=6) as pool:
        together = list(pool.map(lambda q: sentence_round_robin(index, q, k=4, c=3), queries))
    for a, b in zip(alone, together):
        assert (a.doc_ids, a.scores, a.evidence, a.part_evidence) == (b.doc_ids, b.scores, b.evidence, b.part_evidence)
