"""A run's exports say its settings: the CSV's weighted column depends on w, and its k on k_max.

Found by the analyst walk-through: neither the CSV nor the JSON downloads said w or k_max, so a CSV's 'weighted'
column could not be read without the run at hand. The JSON layouts stay exactly the authors' / the issue's; the
download names carry w and k_max, and the CSV repeats the run's id, w and k_max in every row."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

import db
from services.workflows import eval_exports, eval_results


def _run(store: db.Store, w: float) -> int:
    """One 2-aspect query scored by mrag with k_max 2: RSR 0, 0.5 and CSR 0.5, 1 at k = 1, 2."""
    corpus = db.create_corpus(store, f"E w{w:g}")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"document {i}", "label": lab}
                                              for i, lab in enumerate("ab")]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    (qid,) = db.add_queries(store, qs.id, [{"text": "two things", "ground_truth": ids}])
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="e", seed=0,
                             config={"model": "minilm", "layer": 5, "strategies": ["mrag"], "c": 2, "k_max": 2,
                                     "w": w})
    db.save_eval_results(store, run.id, [{"strategy": "mrag", "query_id": qid, "retrieved": ids,
                                          "rsr": [0.0, 0.5], "csr": [0.5, 1.0]}])
    db.finish_eval_run(store, run.id, status="done")
    return run.id


def test_the_csv_repeats_the_runs_id_w_and_k_max_after_the_seven_result_columns(store) -> None:
    rid = _run(store, 0.5)
    text = eval_exports.run_csv(eval_results.load_run_metrics(store, rid))
    assert text.splitlines()[0] == "strategy,query_id,n_aspects,k,rsr,csr,weighted,run_id,w,k_max,label"
    frame = pd.read_csv(io.StringIO(text))
    # weighted = (w·RSR + CSR) / (w + 1) with w = 0.5: k = 1 (0 + 0.5) / 1.5 = 1/3, k = 2 (0.25 + 1) / 1.5 = 5/6
    assert frame["weighted"].tolist() == pytest.approx([1 / 3, 5 / 6])
    assert frame[["k", "run_id", "w", "k_max"]].values.tolist() == [[1, rid, 0.5, 2], [2, rid, 0.5, 2]]
    assert frame["label"].tolist() == ["MRAG", "MRAG"]  # the registry's label


def test_the_download_names_carry_w_and_k_max_and_the_json_layouts_are_unchanged(store) -> None:
    half, two = _run(store, 0.5), _run(store, 2.0)
    m = eval_results.load_run_metrics(store, half)
    assert eval_exports.export_name(m) == f"eval_run_{half}_w0.5_kmax2"
    assert eval_exports.export_name(eval_results.load_run_metrics(store, two)) == f"eval_run_{two}_w2_kmax2"
    assert json.loads(eval_exports.authors_json(m)) == {"mrag": {"2": {"success_ratio": [[0.0], [0.5]],
                                                             "category_success_ratio": [[0.5], [1.0]]}}}
    assert set(json.loads(eval_exports.authors_file_json(m))["mrag"]["2"]) == {
        "rat", "suc", "category_rat", "category_suc"}
