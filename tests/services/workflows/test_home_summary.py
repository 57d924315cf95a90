"""Home's summary of the newest demo run (services.workflows.home_summary), on hand-made runs over the demo queries."""

from __future__ import annotations

import pytest

import db
from mrag_core.sentence_round_robin import ALIAS, STRATEGY_ID
from services.demo.store import ensure_demo_corpus
from services.workflows import home_summary as hs


def _rsr(found_at: dict[int, int], n: int, k_max: int) -> list[float]:
    """RSR for k = 1..k_max of a query with ``n`` aspects whose hits are found_at {k: hits within top k}."""
    out, hits = [], 0
    for k in range(1, k_max + 1):
        hits = found_at.get(k, hits)
        out.append(hits / n)
    return out


def demo_run(store: db.Store, strategies=("standard", "mrag", STRATEGY_ID), status="done") -> int:
    """A run of k_max 6 on three demo queries: one with 1 aspect (q1) and two with 6 (q6a, q6b); CSR is 1 at every
    k, so weighted = (2·RSR + 1) / 3. Hits within the top k (RSR = hits / aspects):

    ============  =====  =========  =========
    strategy      q1     q6a        q6b
    ============  =====  =========  =========
    standard      k1: 1  k3: 2 k6: 3  k3: 1 k6: 2
    mrag          k2: 1  k3: 2 k6: 4  k3: 2 k6: 3
    recommended   k1: 1  k3: 3 k6: 5  k3: 3 k6: 4
    ============  =====  =========  =========
    """
    status_ = ensure_demo_corpus(store)
    queries = db.list_queries(store, status_.query_set_id)
    q1 = next(q for q in queries if q.n_aspects == 1)
    q6a, q6b = [q for q in queries if q.n_aspects == 6][:2]
    hits = {"standard": {q1.id: {1: 1}, q6a.id: {3: 2, 6: 3}, q6b.id: {3: 1, 6: 2}},
            "mrag": {q1.id: {2: 1}, q6a.id: {3: 2, 6: 4}, q6b.id: {3: 2, 6: 3}},
            STRATEGY_ID: {q1.id: {1: 1}, q6a.id: {3: 3, 6: 5}, q6b.id: {3: 3, 6: 4}}}
    n_of = {q.id: q.n_aspects for q in (q1, q6a, q6b)}
    run = db.create_eval_run(store, corpus_id=status_.corpus_id, query_set_id=status_.query_set_id, name="hand",
                             seed=0, config={"model": "minilm", "layer": -1, "strategies": list(strategies),
                                             "c": 32, "k_max": 6, "w": 2.0})
    db.save_eval_results(store, run.id, [
        {"strategy": s, "query_id": q, "retrieved": [], "rsr": _rsr(found, n_of[q], 6), "csr": [1.0] * 6}
        for s in strategies for q, found in hits[s].items()])
    db.finish_eval_run(store, run.id, status=status)
    return run.id


def test_no_summary_before_a_run_and_the_message_says_how(store: db.Store) -> None:
    ensure_demo_corpus(store)
    assert hs.demo_summary(store) is None
    text = hs.how_to_run()
    assert "Evaluation Runs" in text and STRATEGY_ID in text and repr(ALIAS) in text and "Demo queries" in text


def test_the_summary_reads_means_intervals_and_losses_from_the_run(store: db.Store) -> None:
    rid = demo_run(store)
    s = hs.demo_summary(store)
    assert s is not None and s.run_id == rid and s.has_recommended and not s.missing
    assert s.strategies == ["standard", "mrag", STRATEGY_ID] and s.n_queries == 3 and s.k_max == 6
    assert [(r.n_aspects, r.k, r.queries) for r in s.readings] == [(6, 6, 2), (6, 3, 2)]  # largest n; k = n, mid k
    at6, at3 = s.readings
    # two values a, b: resample means a (1/4), (a+b)/2 (1/2), b (1/4): the interval is [min, max]
    assert at6.rsr["standard"].estimate == pytest.approx(5 / 12)
    assert (at6.rsr["standard"].low, at6.rsr["standard"].high) == (pytest.approx(1 / 3), pytest.approx(0.5))
    assert (at6.rsr[STRATEGY_ID].low, at6.rsr[STRATEGY_ID].high) == (pytest.approx(2 / 3), pytest.approx(5 / 6))
    assert at6.weighted["standard"].text() == "0.611 [0.556, 0.667]"  # (2·5/12 + 1) / 3; (2/3 + 1)/3 .. 2/3
    assert at3.rsr["mrag"].text() == "0.333 [0.333, 0.333]"  # both 2/6: zero width
    table = s.table().set_index("strategy")
    assert list(table.index) == ["Standard", "MRAG", "Sentence round-robin"]
    assert table.loc["Sentence round-robin", "RSR (n = 6, k = 6)"] == "0.750 [0.667, 0.833]"
    assert table.loc["Standard", "weighted (n = 6, k = 3)"] == at3.weighted["standard"].text()
    # MRAG misses q1's one document at k = 1 (found at k = 2): below Standard there, nowhere else
    assert s.losses == [
        "MRAG is below Standard on the weighted ratio at 1 aspect, k = 1: 0.33 vs 1.00 (1 query).",
        "MRAG is below Standard on the RSR at 1 aspect, k = 1: 0.00 vs 1.00 (1 query)."]
    # all queries at k = aspects, weighted: mrag 1/3, 7/9, 2/3 vs standard 1, 2/3, 5/9: d = -2/3, +1/9, +1/9
    assert s.verdicts[0] == ("MRAG vs Standard, all 3 queries at k = each query's aspect count: weighted ratio "
                             "0.593 vs 0.741, difference -0.148 [-0.667, +0.111]; the interval holds 0: these "
                             "queries cannot tell them apart.")
    assert s.verdicts[1].startswith("Sentence round-robin vs Standard, all 3 queries") and "[0.000, +0.222]" in \
        s.verdicts[1]
    assert len(s.verdicts) == 3  # recommended vs MRAG too


def test_without_the_recommended_strategy_it_says_how_to_add_it(store: db.Store) -> None:
    rid = demo_run(store, strategies=("standard", "mrag"))
    s = hs.demo_summary(store)
    assert s.strategies == ["standard", "mrag"] and not s.has_recommended
    assert s.missing == [hs.how_to_add_recommended(rid)] and STRATEGY_ID in s.missing[0]
    assert list(s.table()["strategy"]) == ["Standard", "MRAG"]


def test_the_newest_finished_run_with_a_compared_strategy_is_shown(store: db.Store) -> None:
    first = demo_run(store, strategies=("standard", "mrag"))
    demo_run(store, strategies=("standard", STRATEGY_ID), status="cancelled")  # stopped: not shown
    assert hs.demo_summary(store).run_id == first
    newest = demo_run(store, strategies=(STRATEGY_ID,))
    s = hs.demo_summary(store)
    assert s.run_id == newest and s.strategies == [STRATEGY_ID] and s.losses == [] and s.verdicts == []
