"""Compare runs' significance table adjusts its p-values for multiple testing (Holm-Bonferroni).

Found by the analyst walk-through: an item is tested against the reference once per aspect count plus once over all
queries (about 11 tests on the MRAG benchmark), and the table starred every raw p < 0.05 without a word about
multiple testing. Each item's rows are now one family: t_p_holm and wilcoxon_p_holm are the Holm-adjusted p-values
of its rows, and the stars are read from them."""

from __future__ import annotations

import math

import pytest

import db
from mrag_core.significance import holm_adjust
from services.workflows import eval_comparison


def test_holm_adjusts_one_family_by_hand() -> None:
    # sorted: 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04, raised to the running maximum 0.06
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # NaN stays NaN and is not counted: m = 2, so 0.02 x 2 = 0.04 and 0.3 x 1 = 0.3
    out = holm_adjust([0.3, float("nan"), 0.02])
    assert out[0] == pytest.approx(0.3) and math.isnan(out[1]) and out[2] == pytest.approx(0.04)
    assert holm_adjust([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert holm_adjust([]) == [] and math.isnan(holm_adjust([float("nan")])[0])


# Per query: (ground-truth size, reference rsr at k = 1..3, mrag rsr at k = 1..3). csr = rsr; compared on rsr, read at
# k = the number of aspects. 'split' repeats the reference exactly.
ONE = [(1, [0, 0, 0], [1, 1, 1])] * 5 + [(1, [0, 0, 0], [0, 0, 0])] * 2 + [(1, [1, 1, 1], [0, 0, 0])]
TWO = [(2, [0, 0, 0], row) for row in ([0, 1, 1], [0, .5, .5], [0, .5, .5], [0, 0, 0], [.5, 1, 1], [0, 0, 0])]
THREE = [(3, [0, 0, 0], [1 / 3, 2 / 3, 1])]  # one 3-aspect query: no test (NaN), not in the family
# Raw paired p-values of mrag against standard (scipy's ttest_rel and wilcoxon over these differences):
T_P = {"1": 0.10355171027145915, "2": 0.04085940385929585, "all": 0.0045016865605777045}
W_P = {"1": 0.21875, "2": 0.125, "all": 0.013752929099053793}


def _run(store: db.Store) -> int:
    corpus = db.create_corpus(store, "H")
    docs = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"document {i}", "label": lab}
                                               for i, lab in enumerate("abc")]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    rows = ONE + TWO + THREE
    qids = db.add_queries(store, qs.id, [{"text": f"q{i}", "ground_truth": docs[:n]}
                                         for i, (n, _, _) in enumerate(rows)])
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="h", seed=0,
                             config={"model": "minilm", "layer": 5, "strategies": ["standard", "mrag", "split"],
                                     "c": 3, "k_max": 3, "w": 2.0})
    db.save_eval_results(store, run.id, [
        {"strategy": strat, "query_id": qid, "retrieved": docs, "rsr": vals, "csr": vals}
        for qid, (_, ref, mrag) in zip(qids, rows) for strat, vals in (("standard", ref), ("mrag", mrag),
                                                                         ("split", ref))])
    db.finish_eval_run(store, run.id, status="done")
    return run.id


def test_each_items_tests_are_holm_adjusted_and_starred_by_the_adjusted_values(store) -> None:
    rid = _run(store)
    _, tests = eval_comparison.compare_runs(store, [(rid, "standard"), (rid, "mrag"), (rid, "split")], metric="rsr")
    assert list(tests.columns[:11]) == ["item", "reference", "n_aspects", "queries", "mean_diff", "t_p", "t_p_holm",
                                        "t_sig", "wilcoxon_p", "wilcoxon_p_holm", "wilcoxon_sig"]
    mrag = tests[tests["item"] == f"#{rid} mrag"].set_index("n_aspects")
    assert mrag["t_p"].drop("3").to_dict() == pytest.approx(T_P)
    assert mrag["wilcoxon_p"].drop("3").to_dict() == pytest.approx(W_P)
    # family of 3 (the 3-aspect row has no p-value): smallest x 3, next x 2, largest x 1, never below the one before
    assert mrag["t_p_holm"].drop("3").to_dict() == pytest.approx(
        {"all": 3 * T_P["all"], "2": 2 * T_P["2"], "1": T_P["1"]})
    assert mrag["wilcoxon_p_holm"].drop("3").to_dict() == pytest.approx(
        {"all": 3 * W_P["all"], "2": 2 * W_P["2"], "1": 2 * W_P["2"]})  # 0.21875 raised to 0.25
    assert math.isnan(mrag.loc["3", "t_p_holm"]) and math.isnan(mrag.loc["3", "wilcoxon_p_holm"])
    # raw p = 0.041 (2 aspects) would be '*', adjusted 0.082 is not significant; raw 0.0045 (all) would be '**',
    # adjusted 0.0135 is '*'
    assert mrag["t_sig"].to_dict() == {"1": "n.s.", "2": "n.s.", "3": "", "all": "*"}
    assert mrag["wilcoxon_sig"].to_dict() == {"1": "n.s.", "2": "n.s.", "3": "", "all": "*"}
    # split's own family (all differences zero: p = 1): its rows do not enlarge mrag's family, nor mrag's its
    split = tests[tests["item"] == f"#{rid} split"].set_index("n_aspects")
    assert split["t_p_holm"].drop("3").tolist() == [1.0, 1.0, 1.0]
    assert split["t_sig"].tolist() == ["n.s.", "n.s.", "", "n.s."]
