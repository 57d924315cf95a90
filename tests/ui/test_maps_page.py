"""AppTest of the Maps page on indexes too small for a map (no traceback, a plain message)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import db

MAPS_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "7_Maps.py")

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _tiny_index(n_docs: int) -> int:
    """A corpus of ``n_docs`` documents with a finished index of random vectors; the corpus id."""
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.create_corpus(store, "Tiny")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"text {i}", "label": "a"}
                                              for i in range(n_docs)]).document_ids
    run = db.create_embedding_run(store, corpus.id, model_name="minilm", layer=5, pooling="mean", n_heads=2,
                                  head_dim=2, dim=4)
    rng = np.random.default_rng(0)
    db.save_vectors(store, run.id, ids, rng.normal(size=(n_docs, 4)), rng.normal(size=(n_docs, 2, 2)))
    db.finish_embedding_run(store, run.id)
    store.close()
    return corpus.id


def test_maps_page_says_a_map_needs_three_documents() -> None:
    at = AppTest.from_file(MAPS_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = _tiny_index(2)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [i.value for i in at.info] == ["A map needs at least three documents; this index has 2. Add documents on "
                                          "the Corpus Import page and update the index."]
    assert not at.get("plotly_chart")


def test_maps_page_draws_three_documents() -> None:
    at = AppTest.from_file(MAPS_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = _tiny_index(3)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 1 and len(at.dataframe[-1].value) == 3
