"""The Runs tab's downloads name the run's w and k_max (AppTest, a fresh SQLite store).

Found by the analyst walk-through: eval_run_7.csv and eval_run_7.json did not say w (the CSV's weighted column depends
on it) or k_max. The JSON layouts must stay as they are, so the file names carry them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.delta_generator import DeltaGenerator  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402

EVAL_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "9_Evaluation_Runs.py")

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_the_run_downloads_name_w_and_k_max(monkeypatch) -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()  # the demo corpus first, as a first start does
    corpus = db.create_corpus(store, "X")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"document {i}", "label": lab}
                                              for i, lab in enumerate("ab")]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    (qid,) = db.add_queries(store, qs.id, [{"text": "one", "ground_truth": [ids[0]]}])
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="x", seed=0,
                             config={"model": "minilm", "layer": 5, "strategies": ["standard"], "c": 2, "k_max": 2,
                                     "w": 1.5})
    db.save_eval_results(store, run.id, [{"strategy": "standard", "query_id": qid, "retrieved": ids,
                                          "rsr": [1.0, 1.0], "csr": [1.0, 1.0]}])
    db.finish_eval_run(store, run.id, status="done")
    names: dict[str, str] = {}
    original = DeltaGenerator.download_button

    def recording(self, label, data, file_name=None, *args, **kwargs):  # the page's own calls, recorded
        names[kwargs.get("key") or label] = file_name
        return original(self, label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", recording)
    at = AppTest.from_file(EVAL_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus.id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    stem = f"eval_run_{run.id}_w1.5_kmax2"
    assert {k: names[k] for k in ("ev_json", "ev_authors_json", "ev_csv")} == {
        "ev_json": f"{stem}.json", "ev_authors_json": f"{stem}_authors.json", "ev_csv": f"{stem}.csv"}
    assert ("The file names carry the run's w = 1.5 and k_max = 2; the CSV repeats them (and the run's id) in every "
            "row.") in [c.value for c in at.caption]
