"""The Compare runs tab on runs scored with different k_max (AppTest, a fresh SQLite store): it says that every item
is read at the k all the runs scored, and its means are those at that k."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402

EVAL_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "9_Evaluation_Runs.py")

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_compare_tab_reads_runs_of_different_k_max_at_the_same_k() -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()  # the demo corpus first, as a first start does
    corpus = db.create_corpus(store, "K")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"document {i}", "label": lab}
                                              for i, lab in enumerate("abc")]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    (qid,) = db.add_queries(store, qs.id, [{"text": "three things", "ground_truth": ids}])
    runs = {}
    for k_max in (3, 2):  # the same retrieval: one more document found per k
        run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name=f"k{k_max}",
                                 config={"model": "minilm", "layer": 5, "strategies": ["mrag"], "c": 3,
                                         "k_max": k_max, "w": 2.0}, seed=0)
        rsr = [1 / 3, 2 / 3, 1.0][:k_max]
        db.save_eval_results(store, run.id, [{"strategy": "mrag", "query_id": qid, "retrieved": ids[:k_max],
                                              "rsr": rsr, "csr": rsr}])
        db.finish_eval_run(store, run.id, status="done")
        runs[k_max] = run.id
    at = AppTest.from_file(EVAL_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus.id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="ev_cmp_items").value == [(runs[2], "mrag"), (runs[3], "mrag")]
    assert (f"These runs scored different ranges of k (#{runs[2]} k = 1..2, #{runs[3]} k = 1..3): every item is "
            "read at k = the number of aspects, but at most k = 2") in [w.value[:150] for w in at.warning][0]
    means = next(df.value for df in at.dataframe if list(df.value.index) == ["3", "all"])  # Mean weighted per count
    assert means.loc["3"].iloc[::2].tolist() == [pytest.approx(2 / 3)] * 2  # both at k = 2; was 2/3 against 1
