"""Evaluation: prefix ratios by hand, every strategy on a hand-built index, the authors' layout."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from mrag_core.corpus_index import CorpusIndex
from mrag_core.evaluation import (
    AUTHORS_FILE_NAMES,
    EvaluationCancelled,
    QueryCase,
    aspect_groups,
    authors_file_layout,
    authors_layout,
    evaluate,
    prefix_ratios,
    set_ratios,
    summarize,
)
from mrag_core.importance import HeadImportance
from mrag_core.strategies import fusion_mrag_search, fusion_search, mrag_search, standard_search
from tests.support.angles import angle_embeddings
from tests.support.random_embeddings import random_embeddings

torch.set_num_threads(1)


# --------------------------------------------------------------------------- prefix / set ratios

LABELS6 = ["a", "b", "a", "c", "a", "b"]


def test_prefix_ratios_hand_computed() -> None:
    # G = {0, 1, 2}, cat(G) = {a, b}; ranking 4(a) 0(a) 5(b) 1(b) 2(a), shorter than k_max = 6
    rsr, csr = prefix_ratios([4, 0, 5, 1, 2], [0, 1, 2], LABELS6, 6)
    np.testing.assert_allclose(rsr, [0, 1 / 3, 1 / 3, 2 / 3, 1, 1])
    # category a counted once although three a-documents are retrieved
    np.testing.assert_allclose(csr, [0.5, 0.5, 1, 1, 1, 1])
    # a category outside cat(G) (c) never counts; a repeated document counts once
    rsr, csr = prefix_ratios([3, 1, 1, 0], [0, 1], LABELS6, 4)
    np.testing.assert_allclose(rsr, [0, 0.5, 0.5, 1])
    np.testing.assert_allclose(csr, [0, 0.5, 0.5, 1])
    # k_max shorter than the ranking
    rsr, _ = prefix_ratios([0, 1, 2], [2], LABELS6, 2)
    np.testing.assert_allclose(rsr, [0, 0])


def test_prefix_ratios_topic_units() -> None:
    units = [0, 0, 1, 1, 2, 2]  # topic of each document
    labels = ["x", "x", "y", "y", "z", "z"]
    # G = all documents of topics 0 and 1 -> 2 units; retrieving two documents of topic 0 counts once
    rsr, csr = prefix_ratios([1, 0, 4, 3], [0, 1, 2, 3], labels, 4, units)
    np.testing.assert_allclose(rsr, [0.5, 0.5, 0.5, 1])
    np.testing.assert_allclose(csr, [0.5, 0.5, 0.5, 1])
    assert set_ratios([1, 0, 4], [0, 1, 2, 3], labels, units) == (0.5, 0.5)
    assert set_ratios([1, 0, 4, 3], [0, 1, 2, 3], labels, units) == (1.0, 1.0)


def test_set_ratios_match_last_prefix() -> None:
    ranking = [4, 0, 5, 1]
    rsr, csr = prefix_ratios(ranking, [0, 1, 2], LABELS6, 4)
    assert set_ratios(ranking, [0, 1, 2], LABELS6) == pytest.approx((rsr[-1], csr[-1]))
    assert set_ratios([], [0], LABELS6) == (0.0, 0.0)


# --------------------------------------------------------------------------- evaluate on a hand-built index


# Documents (angles in head space 0, head space 1); standard = concat, so split pieces = head spaces.
DOCS = angle_embeddings([[0, 80], [20, 0], [50, 40], [90, 10]])
LABELS = ["a", "b", "a", "c"]
QUERIES = angle_embeddings([[0, 0], [90, 90]])
SUBS = angle_embeddings([[0, 0], [90, 90]])
CASES = [QueryCase((1, 3), 2, (0, 1)), QueryCase((2,), 1, ())]
ALL = ["standard", "mrag", "mrag-decay", "mrag-distance", "split", "fusion", "fusion-mrag"]

# Worked by hand (k = 1..4, c = 3, importance [3, 1]); query 0: G = {1, 3} (b, c); query 1: G = {2} (a).
EXPECTED = {
    # query 0 ranking [1, 2, 0, 3]; query 1 [2, 3, 0, 1]
    "standard": ([[.5, .5, .5, 1], [1, 1, 1, 1]], [[.5, .5, .5, 1], [1, 1, 1, 1]]),
    # query 0 votes 0: 3, 1: 2.5, 2: 1, 3: .5; query 1 votes 3: 3.25, 2: 2, 0: 1, 1: .75
    "mrag": ([[0, .5, .5, 1], [0, 1, 1, 1]], [[0, .5, .5, 1], [0, 1, 1, 1]]),
    # query 0 [1, 0, 2, 3]; query 1 votes 3: 1.25, 0: 1, 2: 1 (tie, 0 first), 1: .25
    "mrag-decay": ([[.5, .5, .5, 1], [0, 0, 1, 1]], [[.5, .5, .5, 1], [0, 1, 1, 1]]),
    # Split (decay) over the pieces of the standard vector, which here are the head spaces: = mrag-decay
    "split": ([[.5, .5, .5, 1], [0, 0, 1, 1]], [[.5, .5, .5, 1], [0, 1, 1, 1]]),
    # sub-lists per depth k, RRF, first k: [1], [2, 1], [2, 0, 1], all; query 1 has no sub-queries
    "fusion": ([[.5, .5, .5, 1], [0, 0, 0, 0]], [[.5, .5, .5, 1], [0, 0, 0, 0]]),
    # MRAG lists per depth: sub 0 [0], [0, 1], [0, 1, 2]; sub 1 [3], [3, 2], [3, 2, 0]
    # fused: [0], [0, 3], [0, 2, 3], all
    "fusion-mrag": ([[0, .5, .5, 1], [0, 0, 0, 0]], [[0, .5, .5, 1], [0, 0, 0, 0]]),
}


@pytest.fixture(scope="module")
def hand_index() -> CorpusIndex:
    imp = HeadImportance(np.ones(2), np.ones(2), np.array([3.0, 1.0]))
    return CorpusIndex.build(DOCS, device="cpu", head_importance_override=imp)


@pytest.fixture(scope="module")
def hand_result(hand_index):
    return evaluate(hand_index, QUERIES, CASES, LABELS, ALL, k_max=4, c=3, subqueries=SUBS)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_evaluate_hand_worked(hand_result, name: str) -> None:
    sr = hand_result.strategies[name]
    rsr, csr = EXPECTED[name]
    np.testing.assert_allclose(sr.rsr, rsr, err_msg=name)
    np.testing.assert_allclose(sr.csr, csr, err_msg=name)


def test_evaluate_rankings(hand_result) -> None:
    s = hand_result.strategies
    assert s["standard"].retrieved == [[1, 2, 0, 3], [2, 3, 0, 1]]
    assert s["mrag"].retrieved == [[0, 1, 2, 3], [3, 2, 0, 1]]
    assert s["mrag-decay"].retrieved[0] == [1, 0, 2, 3]
    # distance: 1 and 0 hold clipped exact matches (1e6; 1 adds 1/(1-cos 20)), then 3 (1/(1-cos 10)), then 2
    assert s["mrag-distance"].retrieved[0] == [1, 0, 3, 2]
    np.testing.assert_allclose(s["mrag-distance"].rsr[0], [.5, .5, 1, 1])
    # k = 4: RRF of [1, 2, 0, 3] and [2, 3, 0, 1]: 2 (1/62 + 1/61), 1 (1/61 + 1/64), 3 (1/64 + 1/62), 0 (2/63)
    assert s["fusion"].retrieved[0] == [2, 1, 3, 0]
    assert s["fusion"].retrieved[1] == []


def test_authors_layout_and_summary(hand_result) -> None:
    layout = authors_layout(hand_result)
    assert list(layout) == ALL
    for name, per_n in layout.items():
        assert list(per_n) == ["1", "2"]  # aspect counts ascending
        for n, block in per_n.items():
            assert set(block) == {"success_ratio", "category_success_ratio"}
            assert len(block["success_ratio"]) == 4  # [k][query]
            assert all(len(row) == 1 for row in block["success_ratio"])
    assert layout["mrag"]["2"]["success_ratio"] == [[0.0], [0.5], [0.5], [1.0]]
    assert layout["mrag"]["1"]["category_success_ratio"] == [[0.0], [1.0], [1.0], [1.0]]
    assert aspect_groups(CASES) == {1: [1], 2: [0]}

    rows = {(r.strategy, r.n_aspects, r.k): r for r in summarize(hand_result)}
    assert {(n, k) for (s, n, k) in rows if s == "mrag"} == {(1, 1), (1, 2), (2, 2), (2, 4)}
    r = rows[("mrag", 2, 2)]
    assert (r.rsr, r.csr, r.n_queries) == (0.5, 0.5, 1)
    assert r.weighted == pytest.approx((2 * 0.5 + 0.5) / 3)
    r = rows[("mrag-decay", 1, 1)]
    assert (r.rsr, r.csr, r.weighted) == (0.0, 0.0, 0.0)
    r = rows[("standard", 1, 2)]
    assert r.weighted == pytest.approx(1.0)
    assert summarize(hand_result, w=0.0)[0].weighted == pytest.approx(summarize(hand_result)[0].csr)


def test_authors_file_layout_has_their_keys_and_names(hand_result) -> None:
    files = authors_file_layout(hand_result)
    # ALL, as the authors' files spell it
    assert list(files) == ["standard-rag", "mrag", "mrag-strategy-decay", "mrag-strategy-distance", "split-rag",
                           "fusion-rag", "fusion-mrag"]
    assert set(files["mrag"]["2"]) == {"rat", "suc", "category_rat", "category_suc"}
    # mrag on the 2-aspect query: RSR 0, .5, .5, 1 at k = 1..4; success only where every aspect is found
    assert files["mrag"]["2"]["rat"] == [[0.0], [0.5], [0.5], [1.0]]
    assert files["mrag"]["2"]["suc"] == [[0], [0], [0], [1]]
    assert files["mrag"]["1"]["category_rat"] == [[0.0], [1.0], [1.0], [1.0]]
    assert files["mrag"]["1"]["category_suc"] == [[0], [1], [1], [1]]
    ours = authors_layout(hand_result)
    for name in ALL:
        theirs = files[AUTHORS_FILE_NAMES.get(name, name)]
        for n in ("1", "2"):
            assert theirs[n]["rat"] == ours[name][n]["success_ratio"]
            assert theirs[n]["category_rat"] == ours[name][n]["category_success_ratio"]


def test_evaluate_errors_progress_and_cancel(hand_index) -> None:
    with pytest.raises(ValueError, match="unknown strategies"):
        evaluate(hand_index, QUERIES, CASES, LABELS, ["standard", "bm25"], k_max=4)
    with pytest.raises(ValueError, match="sub-query"):
        evaluate(hand_index, QUERIES, CASES, LABELS, ["fusion"], k_max=4)
    calls: list[tuple[int, int]] = []
    evaluate(hand_index, QUERIES, CASES, LABELS, ["standard", "fusion"], k_max=4, subqueries=SUBS,
             progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (4, 4)
    ev = threading.Event()
    ev.set()
    with pytest.raises(EvaluationCancelled):
        evaluate(hand_index, QUERIES, CASES, LABELS, ["fusion"], k_max=4, subqueries=SUBS, cancel=ev)


def test_k_max_larger_than_corpus(hand_index, hand_result) -> None:
    """k_max = 6 > 4 documents: every strategy runs; k = 5, 6 keep the k = 4 values."""
    res = evaluate(hand_index, QUERIES, CASES, LABELS, ALL, k_max=6, c=3, subqueries=SUBS)
    for name in ALL:
        sr = res.strategies[name]
        assert sr.rsr.shape == (2, 6)
        np.testing.assert_allclose(sr.rsr[:, :4], hand_result.strategies[name].rsr, err_msg=name)
        np.testing.assert_allclose(sr.rsr[:, 4:], np.repeat(sr.rsr[:, 3:4], 2, axis=1), err_msg=name)
        np.testing.assert_allclose(sr.csr[:, 4:], np.repeat(sr.csr[:, 3:4], 2, axis=1), err_msg=name)


# --------------------------------------------------------------------------- random data: definitions


def test_evaluate_matches_strategy_definitions_on_random_data() -> None:
    rng = np.random.default_rng(3)
    n = 40
    docs = random_embeddings(rng, n, 16, 4, 6)
    qs = random_embeddings(rng, 3, 16, 4, 6)
    subs = random_embeddings(rng, 5, 16, 4, 6)
    labels = [f"L{i % 7}" for i in range(n)]
    cases = [QueryCase((1, 8, 20), 3, (0, 1)), QueryCase((5, 6), 2, (2, 3, 4)), QueryCase((33,), 1, ())]
    index = CorpusIndex.build(docs, device="cpu", pairs_per_doc=4)
    k_max, c = 6, 4
    res = evaluate(index, qs, cases, labels, ["standard", "mrag", "fusion", "fusion-mrag"], k_max=k_max, c=c,
                   subqueries=subs)
    for qi, case in enumerate(cases):
        std = standard_search(index, qs.take([qi]), k_max)[0].doc_ids
        np.testing.assert_allclose(
            res.strategies["standard"].rsr[qi], prefix_ratios(std, case.relevant, labels, k_max)[0]
        )
        mr = mrag_search(index, qs.take([qi]), k_max, c)[0].doc_ids
        assert res.strategies["mrag"].retrieved[qi] == mr
        np.testing.assert_allclose(res.strategies["mrag"].csr[qi], prefix_ratios(mr, case.relevant, labels, k_max)[1])
        sub = subs.take(list(case.subquery_rows))
        for k in range(1, k_max + 1):
            # Fusion at k: each sub-query searched to depth k, fused, first k
            f = fusion_search(index, sub, k, c=k).doc_ids if len(sub) else []
            fm = fusion_mrag_search(index, sub, k, c=k).doc_ids if len(sub) else []
            assert (res.strategies["fusion"].rsr[qi, k - 1], res.strategies["fusion"].csr[qi, k - 1]) == pytest.approx(
                set_ratios(f, case.relevant, labels))
            assert (
                res.strategies["fusion-mrag"].rsr[qi, k - 1],
                res.strategies["fusion-mrag"].csr[qi, k - 1],
            ) == pytest.approx(set_ratios(fm, case.relevant, labels))
        assert res.strategies["fusion-mrag"].retrieved[qi] == fm


class _RecordingView:
    """A search view that records the vote of every search; ``per_vote``: it claims a calibration per vote."""

    def __init__(self, inner, per_vote: bool) -> None:
        self.inner, self.per_vote, self.votes = inner, per_vote, []

    def search(self, queries, depth, vote=None):
        self.votes.append(vote)
        return self.inner.search(queries, depth, vote=vote)

    def search_key(self, vote):
        return vote if self.per_vote else None

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_evaluate_searches_each_view_once_per_search_key() -> None:
    import dataclasses

    rng = np.random.default_rng(9)
    docs, qs, subs = (random_embeddings(rng, m, 16, 4, 6) for m in (30, 3, 4))
    labels = [f"L{i % 5}" for i in range(30)]
    cases = [QueryCase((1, 8), 2, (0, 1)), QueryCase((5,), 1, (2, 3)), QueryCase((20, 21, 22), 3, ())]
    strategies = ["mrag", "mrag-decay", "mrag-distance", "split", "split-weighted", "fusion-mrag"]
    index = CorpusIndex.build(docs, device="cpu", pairs_per_doc=4)
    plain = evaluate(index, qs, cases, labels, strategies, k_max=5, c=4, subqueries=subs)
    searched = {}
    for per_vote in (False, True):
        heads, split = _RecordingView(index.heads, per_vote), _RecordingView(index.split, per_vote)
        res = evaluate(dataclasses.replace(index, heads=heads, split=split), qs, cases, labels, strategies,
                       k_max=5, c=4, subqueries=subs)
        for name in strategies:  # exact search: the same hits whichever vote they were searched for
            assert res.strategies[name].retrieved == plain.strategies[name].retrieved
            np.testing.assert_array_equal(res.strategies[name].rsr, plain.strategies[name].rsr)
        searched[per_vote] = (heads.votes, split.votes)
    # one key for every vote: the sub-queries' head search (first), then one shared search per view for the queries
    assert searched[False] == (["importance", "importance"], ["decay"])
    # a key per vote: each vote's lists come from a search made for it
    assert searched[True] == (["importance", "importance", "decay", "distance"], ["decay", "importance"])
