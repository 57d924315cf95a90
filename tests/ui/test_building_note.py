"""AppTest: while a corpus' first index is being built, the pages that need one say so (how far the build got),
instead of telling the user to build one; the landing page says the same of the demo corpus."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import db
from services.demo import DEMO_CORPUS_NAME

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _corpus_with_a_build(store: db.Store, n_docs: int, n_saved: int, owner: str) -> tuple[int, int]:
    """A corpus of ``n_docs`` documents and a running build of it with ``n_saved`` documents embedded, claimed by
    ``owner`` ("" for no process: an interrupted build); (corpus id, run id)."""
    corpus = db.create_corpus(store, "Notes")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"text {i}", "label": "a"}
                                              for i in range(n_docs)]).document_ids
    run = db.create_embedding_run(store, corpus.id, model_name="models/minilm", layer=5, pooling="mean", n_heads=2,
                                  head_dim=2, dim=4, owner=owner)
    rng = np.random.default_rng(0)
    db.save_vectors(store, run.id, ids[:n_saved], rng.normal(size=(n_saved, 4)), rng.normal(size=(n_saved, 2, 2)))
    return corpus.id, run.id


def _open(page: str, corpus_id: int) -> AppTest:
    """``page`` of the whole app (its navigation: the page links work) opened on corpus ``corpus_id``."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.session_state["corpus_id"] = corpus_id
    at.switch_page(f"pages/{page}").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("page", ["5_Compare.py", "7_Maps.py", "10_Reader.py"])
def test_a_page_that_needs_an_index_says_one_is_being_built(page: str) -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus_id, run_id = _corpus_with_a_build(store, 5, 2, owner=db.new_owner())
    at = _open(page, corpus_id)
    assert [i.value for i in at.info] == [
        f"This corpus has no finished index yet. An index is being built, #{run_id} (minilm, layer 5): 2 of 5 "
        "documents embedded. Follow it on the **Index** page and come back here when it has finished."]
    assert [link.proto.page for link in at.get("page_link")] == ["Index"]  # the URL name of pages/4_Index.py
    store.close()


def test_an_interrupted_build_is_not_called_under_way() -> None:
    """A running build whose process stopped beating (here: never claimed) is no build under way."""
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus_id, _ = _corpus_with_a_build(store, 3, 1, owner="")
    at = _open("5_Compare.py", corpus_id)
    assert [i.value for i in at.info] == [
        "This corpus has no finished index yet: build one on the **Index** page first."]
    store.close()


def test_landing_page_says_the_demo_index_is_being_built() -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()  # creates the demo corpus
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    demo = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
    run = db.create_embedding_run(store, demo.id, model_name="minilm", layer=5, pooling="mean", n_heads=2,
                                  head_dim=2, dim=4, owner=db.new_owner())
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    notes = [i.value for i in at.info if "demo corpus" in i.value]
    assert notes == [f"The demo corpus has no finished index yet. An index is being built, #{run.id} (minilm, layer "
                     f"5): 0 of {demo.n_documents} documents embedded. Step 1 opens the Index page, where you can "
                     "follow it."]
    store.close()
