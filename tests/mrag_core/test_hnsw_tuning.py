"""efSearch calibration: the ladder, pseudo-queries, recall, the per-space choice, and real HNSW indexes."""

from __future__ import annotations

import numpy as np
import pytest

from mrag_core.backends import FaissIndex, build_index, normalize_spaces
from mrag_core.hnsw_tuning import (
    Calibration,
    calibrate,
    calibrate_votes,
    calibration_queries,
    calibration_sets,
    describe,
    ef_ladder,
    exact_hits,
    final_list_recall,
    first_reaching,
    gaussian_queries,
    pseudo_queries,
    recall_at,
)
from mrag_core.kernels import sum_votes


def test_ef_ladder_doubles_with_half_steps_and_caps_at_n() -> None:
    assert ef_ladder(32, 100_000) == [32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048]
    assert ef_ladder(32, 100) == [32, 48, 64, 96, 100]  # no efSearch above the number of documents
    assert ef_ladder(10, 5) == [10]  # a corpus smaller than the depth: the depth itself
    assert ef_ladder(4, 1000, max_factor=2) == [4, 6, 8]


def test_recall_counts_overlap_per_row_and_ignores_missing_ids() -> None:
    exact = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    got = np.array([[4, 3, 9, 1], [8, -1, -1, 5]])
    # row 0: {1, 3, 4} of 4 = 0.75; row 1: {5, 8} of 4 = 0.5 (the -1 are misses)
    assert recall_at(got, exact) == pytest.approx(0.625)
    assert recall_at(exact, exact) == 1.0


def test_pseudo_queries_are_means_of_two_different_documents() -> None:
    x = np.array([[[0.0, 0.0]], [[2.0, 4.0]]], dtype=np.float32)  # two documents, one space
    q = pseudo_queries(x, 5, seed=3)
    assert q.shape == (5, 1, 2)
    np.testing.assert_array_equal(q, np.tile([[[1.0, 2.0]]], (5, 1, 1)))  # always docs 0 and 1, never one twice
    rng = np.random.default_rng(0)
    y = rng.normal(size=(50, 3, 4)).astype(np.float32)
    q = pseudo_queries(y, 20, seed=1)
    # every query is the mean of one pair (a, b), a != b, the same pair in every space
    for row in q:
        matches = [
            (a, b) for a in range(50) for b in range(50) if a != b and np.allclose(row, (y[a] + y[b]) / 2, atol=1e-6)
        ]
        assert matches
    np.testing.assert_array_equal(q, pseudo_queries(y, 20, seed=1))  # seeded


def test_gaussian_queries_follow_the_documents_joint_gaussian_fit() -> None:
    rng = np.random.default_rng(2)
    y = (rng.normal(size=(40, 2, 3)) @ np.diag([1.0, 2.0, 0.5]) + [3.0, -1.0, 0.0]).astype(np.float32)
    q = gaussian_queries(y, 40_000, seed=4)
    assert q.shape == (40_000, 2, 3) and q.dtype == np.float32
    flat_docs, flat_q = y.reshape(40, 6).astype(np.float64), q.reshape(-1, 6).astype(np.float64)
    # the draws' mean and covariance are the documents' (all 6 coordinates jointly, cross-space terms too)
    np.testing.assert_allclose(flat_q.mean(axis=0), flat_docs.mean(axis=0), atol=0.05)
    np.testing.assert_allclose(np.cov(flat_q.T), np.cov(flat_docs.T), atol=0.1)
    np.testing.assert_array_equal(q[:10], gaussian_queries(y, 10, seed=4)[:10])  # seeded
    assert not np.array_equal(gaussian_queries(y, 10, seed=4), gaussian_queries(y, 10, seed=5))
    # a sample of the documents stands for all of them; one document: the document itself
    assert gaussian_queries(y, 7, sample=8).shape == (7, 2, 3)
    np.testing.assert_array_equal(gaussian_queries(y[:1], 3), np.repeat(y[:1], 3, axis=0))
    between, generic = calibration_queries(y, 5, seed=0)
    np.testing.assert_array_equal(between, pseudo_queries(y, 5, seed=0))
    np.testing.assert_array_equal(generic, gaussian_queries(y, 5, seed=1))


def test_calibrate_needs_the_target_on_both_kinds_of_queries() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 1, 16)).astype(np.float32)
    between = {row.tobytes() for row in calibration_queries(x, 10, seed=0)[0][:, 0]}

    def fake_search(space: int, queries: np.ndarray, depth: int, ef: int) -> np.ndarray:
        """Exact lists; below efSearch 48 (between queries) or 128 (generic ones), half of each is lost."""
        ids = exact_hits(x, queries[:, None, :], depth)[0][:, 0].copy()
        needs = np.array([48 if q.tobytes() in between else 128 for q in queries])
        ids[ef < needs, depth // 2:] = -1
        return ids

    cal = calibrate(fake_search, x, depth=16, target=0.9, count=10)
    assert cal.ef.tolist() == [128] and cal.recall.tolist() == [1.0]  # between queries alone would stop at 48


def test_exact_hits_match_sorting_in_every_space() -> None:
    rng = np.random.default_rng(4)
    x, q = rng.normal(size=(200, 3, 8)).astype(np.float32), rng.normal(size=(6, 3, 8)).astype(np.float32)
    ids, scores = exact_hits(x, q, 10)
    assert ids.shape == scores.shape == (6, 3, 10)
    for s in range(3):
        sims = q[:, s].astype(np.float64) @ x[:, s].T.astype(np.float64)
        expected = np.argsort(-sims, axis=1)[:, :10]
        np.testing.assert_array_equal(ids[:, s], expected)
        np.testing.assert_allclose(scores[:, s], np.take_along_axis(sims, expected, axis=1), rtol=1e-5)


def test_first_reaching_stops_at_the_first_value_that_meets_the_target() -> None:
    measured: list[int] = []

    def measure(ef: int) -> float:
        measured.append(ef)
        return ef / 100

    assert first_reaching([16, 32, 64, 128], measure, 0.5) == (64, 0.64)
    assert measured == [16, 32, 64]  # nothing after the first hit is measured
    assert first_reaching([16, 32], measure, 0.9) == (32, 0.32)  # none reaches it: the last, with its recall


def test_calibrate_picks_the_smallest_ef_reaching_the_target_per_space() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(400, 2, 8)).astype(np.float32)
    needs = {0: 48, 1: 128}  # space s returns the exact list only from ef >= needs[s]; below, half of it

    def fake_search(space: int, queries: np.ndarray, depth: int, ef: int) -> np.ndarray:
        ids = exact_hits(x[:, space:space + 1], queries[:, None, :], depth)[0][:, 0]
        if ef < needs[space]:
            ids[:, depth // 2:] = -1
        return ids

    cal = calibrate(fake_search, x, depth=16, target=0.9, count=10)
    assert cal.ef.tolist() == [48, 128]
    assert cal.recall.tolist() == [1.0, 1.0] and cal.met
    # a target above what the largest efSearch reaches: the last ladder step, and the miss is recorded
    never = calibrate(lambda s, q, d, ef: np.full((len(q), d), -1), x, depth=16, target=0.5, count=4)
    assert never.ef.tolist() == [400, 400] and never.recall.tolist() == [0.0, 0.0] and not never.met
    with pytest.raises(ValueError, match="recall target"):
        calibrate(fake_search, x, target=0.0)


def test_calibration_scales_ef_for_deeper_searches_only() -> None:
    cal = Calibration(ef=np.array([48, 100]), recall=np.array([0.95, 0.91]), depth=32, target=0.9)
    assert cal.ef_for(0, 32) == 48
    assert cal.ef_for(0, 10) == 48  # shallower: kept
    assert cal.ef_for(0, 64) == 96  # twice as deep: twice the candidates
    assert cal.ef_for(1, 40) == 125  # ceil(100 * 40 / 32)


@pytest.fixture(scope="module")
def clustered() -> np.ndarray:
    """2,000 documents in 40 clusters, in two spaces of 24 dimensions."""
    rng = np.random.default_rng(6)
    centres = rng.normal(size=(40, 2, 24))
    labels = rng.integers(0, 40, size=2000)
    return (centres[labels] + 0.6 * rng.normal(size=(2000, 2, 24))).astype(np.float32)


def test_hnsw_index_meets_its_target_on_fresh_queries(clustered: np.ndarray) -> None:
    index = FaissIndex(clustered, "cosine", kind="hnsw", target_recall=0.95)
    cal = index.calibration
    assert cal is not None and cal.depth == 32 and cal.target == 0.95
    assert cal.met, cal.recall
    # queries the calibration never saw: recall stays near the target in every space
    fresh = pseudo_queries(clustered, 60, seed=99)
    got = index.search(fresh, 32).ids
    exact = FaissIndex(clustered, "cosine", kind="flat").search(fresh, 32).ids
    for s in range(2):
        assert recall_at(got[:, s], exact[:, s]) >= 0.9
    generic = gaussian_queries(clustered, 60, seed=98)  # and on queries close to no document in particular
    got, exact = index.search(generic, 32).ids, FaissIndex(clustered, "cosine", kind="flat").search(generic, 32).ids
    for s in range(2):
        assert recall_at(got[:, s], exact[:, s]) >= 0.9
    # each space searches with its own calibrated efSearch
    assert [index.ef_for(s, 32) for s in range(2)] == cal.ef.tolist()


def test_higher_target_never_picks_a_smaller_ef(clustered: np.ndarray) -> None:
    low = FaissIndex(clustered[:, :1], "cosine", kind="hnsw", target_recall=0.6).calibration
    high = FaissIndex(clustered[:, :1], "cosine", kind="hnsw", target_recall=0.99).calibration
    assert low is not None and high is not None
    assert high.ef[0] >= low.ef[0] and high.recall[0] >= low.recall[0]
    assert high.recall[0] >= 0.99 or high.ef[0] == ef_ladder(32, 2000)[-1]


def test_fixed_ef_without_target_and_override(clustered: np.ndarray) -> None:
    fixed = build_index(clustered, "faiss-hnsw", "cosine", target_recall=None)
    assert fixed.calibration is None
    assert fixed.ef_for(0, 32) == 64 and fixed.ef_for(1, 50) == 100  # max(64, 2c)
    fixed.ef_search = 300
    assert fixed.ef_for(0, 32) == 300
    exact = FaissIndex(clustered, "cosine", kind="flat").search(clustered[:20], 32).ids
    assert recall_at(fixed.search(clustered[:20], 32).ids[:, 0], exact[:, 0]) >= 0.95  # a large efSearch is near exact
    with pytest.raises(ValueError, match="recall target"):
        FaissIndex(clustered, kind="hnsw", target_recall=1.5)
    assert FaissIndex(clustered, kind="flat").calibration is None  # exact: nothing to calibrate


def test_changing_ef_search_takes_effect_on_the_next_search() -> None:
    rng = np.random.default_rng(8)
    x = rng.normal(size=(3000, 1, 32)).astype(np.float32)  # unclustered: a small efSearch misses neighbours
    q = rng.normal(size=(30, 1, 32)).astype(np.float32)
    exact = FaissIndex(x, "cosine", kind="flat").search(q, 32).ids[:, 0]
    index = FaissIndex(x, "cosine", kind="hnsw", target_recall=None)
    index.ef_search = 32
    low = recall_at(index.search(q, 32).ids[:, 0], exact)
    index.ef_search = 3000
    high = recall_at(index.search(q, 32).ids[:, 0], exact)
    index.ef_search = 32
    assert recall_at(index.search(q, 32).ids[:, 0], exact) == low  # and back again
    assert low < 0.95 and high > 0.99, (low, high)



def _decay_vote(ids: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """2^-p per hit, summed per document: the top ranks decide."""
    return sum_votes(ids, np.broadcast_to(np.exp2(-np.arange(ids.shape[1])), ids.shape), k)[0]


def _flat_vote(ids: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """One vote per hit: a deep rank counts as much as the top one."""
    return sum_votes(ids, np.ones(ids.shape), k)[0]


def test_final_list_recall_by_hand() -> None:
    # one query, two spaces, depth 3; the exact hits and a search that lost doc 7 from space 1
    exact = (np.array([[[1, 2, 3], [7, 1, 4]]]), np.zeros((1, 2, 3)))
    lossy = (np.array([[[1, 2, 3], [1, 4, -1]]]), np.zeros((1, 2, 3)))
    # decay vote, exact: 1 -> 1 + 1/2, 7 -> 1, 2 -> 1/2, 4 -> 1/4, 3 -> 1/4: top 2 = [1, 7]
    # lossy: 1 -> 2, 2 -> 1/2, 4 -> 1/2, 3 -> 1/4: top 2 = [1, 2] -> recall@2 = 1/2; top 1 = [1] -> 1
    assert final_list_recall(_decay_vote, lossy, exact, (1,)) == 1.0
    assert final_list_recall(_decay_vote, lossy, exact, (1, 2)) == 0.5  # the lower of the two
    assert final_list_recall(_decay_vote, exact, exact, (1, 2, 3)) == 1.0


def test_calibrate_votes_picks_the_smallest_ef_whose_final_lists_reach_the_target() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 3, 8)).astype(np.float32)

    def fake_search(queries: np.ndarray, depth: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact hits, of which only the top ``ef // 4`` ranks survive (the rest are misses)."""
        ids, scores = exact_hits(x, queries, depth)
        ids = ids.copy()
        ids[:, :, ef // 4:] = -1
        return ids, scores

    searched: list[int] = []

    def counting_search(queries: np.ndarray, depth: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        searched.append(ef)
        return fake_search(queries, depth, ef)

    ladder = ef_ladder(16, 300)  # [16, 24, 32, 48, 64, ...]: 4, 6, 8, 12, 16 ranks kept
    sets = calibration_sets(x, 16, count=20, seed=0)
    assert [q.shape for q, _ in sets] == [(20, 3, 8)] * 2
    cals = calibrate_votes(counting_search, x, {"decay": _decay_vote, "flat": _flat_vote}, depth=16, target=0.9,
                           ks=(5, 16), sets=sets)
    # one walk up the ladder for both votes: each step searched once per kind of query, up to the last vote's value
    steps = ladder[: ladder.index(int(cals["flat"].ef[0])) + 1]
    assert searched == [ef for ef in steps for _ in sets]
    # the shared sets are what the calibration builds by itself from count and seed
    alone = calibrate_votes(fake_search, x, {"decay": _decay_vote}, depth=16, target=0.9, count=20, ks=(5, 16))
    assert alone["decay"].ef.tolist() == cals["decay"].ef.tolist()
    assert calibrate_votes(fake_search, x, {}, depth=16) == {}

    def by_hand(vote, ef: int) -> float:  # the lower of the two kinds of queries
        return min(final_list_recall(vote, fake_search(q, 16, ef), exact, (5, 16)) for q, exact in sets)

    for name, vote in (("decay", _decay_vote), ("flat", _flat_vote)):
        cal = cals[name]
        ef = int(cal.ef[0])
        assert (cal.ef == ef).all() and cal.met and cal.measure == "final top-5/16 recall"
        assert cal.recall[0] == by_hand(vote, ef) >= 0.9
        if ef != ladder[0]:  # the ladder step below misses the target
            assert by_hand(vote, ladder[ladder.index(ef) - 1]) < 0.9
    # every hit counting alike needs the whole list right; 2^-p needs only the top ranks
    assert cals["flat"].ef[0] == 64 and cals["decay"].ef[0] < 64


def test_hnsw_votes_are_calibrated_on_their_final_lists(clustered: np.ndarray) -> None:
    votes = {"decay": _decay_vote, "flat": _flat_vote}
    index = FaissIndex(clustered, "cosine", kind="hnsw", target_recall=0.9, votes=votes)
    assert set(index.vote_calibrations) == {"decay", "flat"}
    flat_idx = FaissIndex(clustered, "cosine", kind="flat")
    fresh = normalize_spaces(pseudo_queries(clustered, 60, seed=77))
    exact = flat_idx.search(fresh, 32)
    for name, vote in votes.items():
        cal = index.vote_calibrations[name]
        assert cal.met and index.search_key(name) == name
        assert [index.ef_for(s, 32, name) for s in range(2)] == cal.ef.tolist()
        got = index.search(fresh, 32, vote=name)  # searched with the vote's own efSearch
        assert final_list_recall(vote, (got.ids, got.scores), (exact.ids, exact.scores), (10, 32)) >= 0.85
        assert describe(f"heads, {name} vote", cal).startswith(
            f"heads, {name} vote: efSearch {cal.ef[0]}, final top-10/32 recall"
        )
    assert index.vote_calibrations["flat"].ef[0] >= index.vote_calibrations["decay"].ef[0]
    assert index.search_key("unknown") is None and index.search_key(None) is None  # per-space calibration
    index.ef_search = 200
    assert index.search_key("decay") is None and index.ef_for(0, 32, "decay") == 200  # an override wins
    for exact_index in (flat_idx, build_index(clustered, "torch", device="cpu")):
        assert exact_index.search_key("decay") is None
        np.testing.assert_array_equal(exact_index.search(fresh, 8, vote="decay").ids, exact_index.search(fresh, 8).ids)


def test_the_apps_votes_are_rankings_so_shorter_lists_are_prefixes() -> None:
    # calibrate_votes votes once at the largest k and takes prefixes; that holds only if each vote's
    # top k' is the start of its top k: check every variant the app calibrates, ties included
    from mrag_core.corpus_index import vote_functions
    from mrag_core.voting import VARIANTS

    rng = np.random.default_rng(21)
    ids = rng.integers(0, 40, (5, 8, 16))  # 8 spaces, depth 16, 40 documents: many shared hits and ties
    scores = np.sort(rng.random((5, 8, 16)), axis=2)[:, :, ::-1].copy()
    for name, vote in vote_functions(rng.random(8), "cosine", VARIANTS).items():
        for i in range(5):
            longest = vote(ids[i], scores[i], 16)
            for k in (1, 5, 10):
                np.testing.assert_array_equal(vote(ids[i], scores[i], k), longest[:k], err_msg=name)
