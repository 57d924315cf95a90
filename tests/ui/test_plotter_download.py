"""Evaluation Runs offers a run as the authors' CLI plotter (``multirag-cli plot``) reads it, beside the two other
JSON layouts, and says under the downloads which of the plotter's keys the run cannot fill."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.delta_generator import DeltaGenerator  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402
from services.workflows import (
    eval_exports,  # noqa: E402
    eval_results,  # noqa: E402
)
from ui.render import md_plain  # noqa: E402

EVAL_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "9_Evaluation_Runs.py")

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_the_run_downloads_for_the_authors_plotter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()  # the demo corpus first, as a first start does
    corpus = db.create_corpus(store, "X")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"document {i}", "label": lab}
                                              for i, lab in enumerate("abc")]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    q1, q2 = db.add_queries(store, qs.id, [{"text": "one", "ground_truth": [ids[0], ids[1]]},
                                           {"text": "two", "ground_truth": [ids[1], ids[2]]}])
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, name="x", seed=0,
                             config={"model": "minilm", "layer": 5, "strategies": ["standard", "mrag"], "c": 3,
                                     "k_max": 3, "w": 2.0})
    ratios = {("standard", q1): [0.0, 0.5, 1.0], ("standard", q2): [0.5, 0.5, 1.0],
              ("mrag", q1): [0.5, 1.0, 1.0], ("mrag", q2): [0.5, 1.0, 1.0]}
    db.save_eval_results(store, run.id, [{"strategy": s, "query_id": q, "retrieved": ids, "rsr": r, "csr": r}
                                         for (s, q), r in ratios.items()])
    db.finish_eval_run(store, run.id, status="done")
    store.close()
    downloads: dict[str, tuple[str, object]] = {}
    original = DeltaGenerator.download_button

    def recording(self, label, data, file_name=None, *args, **kwargs):  # noqa: ANN001, ANN202 - the page's calls
        downloads[kwargs.get("key") or label] = (file_name, data)
        return original(self, label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", recording)
    at = AppTest.from_file(EVAL_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus.id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    name, data = downloads["ev_plotter_json"]
    assert name == f"eval_run_{run.id}_w2_kmax3_plotter.json"
    path = tmp_path / name
    path.write_text(data() if callable(data) else data)
    # read as the plotter reads it: df[key][query type][measure][k - 1] lists the queries' ratios at k
    df = pd.read_json(path)
    assert list(df.columns) == ["standard-rag", "multirag"] and list(df.index) == [2]
    assert df["multirag"][2]["success_ratio"] == [[0.5, 0.5], [1.0, 1.0], [1.0, 1.0]]
    assert df["standard-rag"][2]["category_success_ratio"][1] == [0.5, 0.5]
    assert json.loads(path.read_text())["multirag"]["2"]["success"] == [[0, 0], [1, 1], [1, 1]]
    captions = [c.value for c in at.caption if c.value.startswith("Plotter file: ")]
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    notes = eval_exports.plotter_notes(eval_results.load_run_metrics(store, run.id))
    store.close()
    assert captions == [f"Plotter file: {md_plain(note)}." for note in notes]  # escaped for Markdown
    assert len(notes) == 2
    assert notes[0].startswith("the authors' plotter reads 8 strategy keys; multirag-strategy-decay, "
                               "multirag-strategy-distance, split-rag, split-rag-strategy-weighted, fusion-rag, "
                               "fusion-multirag are left out")
    assert "these results hold queries of 2 aspects, scored to k = 3" in notes[1]
