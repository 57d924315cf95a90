"""QA walk-through of the retrieval pages as an analyst and a demo presenter would use them: edge inputs give a
plain message, never a traceback. AppTest on small corpora written here (random vectors in MiniLM's shapes, so the
model loads and matches the index) or the demo corpus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.apptest import no_exceptions, page_store

PAGES = Path(__file__).resolve().parents[2] / "pages"
TIMEOUT = 120

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def minilm_shaped_index(n_docs: int) -> tuple[int, int]:
    """A corpus of ``n_docs`` documents with a finished index of random vectors in MiniLM's shapes (layer 5, mean
    pooling, 12 heads x 32); returns (corpus id, index id)."""
    store = page_store()
    corpus = db.create_corpus(store, "Small")
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": f"text {i}", "label": "a"}
                                              for i in range(n_docs)]).document_ids
    run = db.create_embedding_run(store, corpus.id, model_name="minilm", layer=5, pooling="mean", n_heads=12,
                                  head_dim=32, dim=384)
    if n_docs:
        rng = np.random.default_rng(0)
        db.save_vectors(store, run.id, ids, rng.normal(size=(n_docs, 384)), rng.normal(size=(n_docs, 12, 32)))
    db.finish_embedding_run(store, run.id)
    store.close()
    return corpus.id, run.id


@pytest.mark.parametrize("name", ["5_Compare.py", "10_Reader.py"])
@pytest.mark.parametrize("n_docs", [0, 1])
def test_an_index_too_small_to_search_is_explained_not_a_traceback(name: str, n_docs: int) -> None:
    """Compare and Reader raised 'ValueError: embedding run 1 holds 1 document(s); at least two are needed' on the
    index of a corpus with one document (or none), which the Index page builds and calls ready."""
    corpus_id, run_id = minilm_shaped_index(n_docs)
    at = AppTest.from_file(str(PAGES / name), default_timeout=TIMEOUT)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    no_exceptions(at)
    words = "no documents" if n_docs == 0 else "1 document"
    assert [i.value for i in at.info] == [
        f"Index #{run_id} holds {words}; searching needs at least 2 (head importance compares pairs of documents). "
        "Add documents on the Corpus Import page, then update the index on the Index page."]


def test_the_index_page_offers_no_build_for_an_empty_corpus() -> None:
    """It offered Build index, then 'Embedded 0 documents' and 'Index #1 is ready: 0 documents ... Open Compare to
    query it', where Compare could not search it."""
    store = page_store()
    corpus = db.create_corpus(store, "Empty")
    store.close()
    at = AppTest.from_file(str(PAGES / "4_Index.py"), default_timeout=TIMEOUT)
    at.session_state["corpus_id"] = corpus.id
    at.run()
    no_exceptions(at)
    assert [i.value for i in at.info] == ["This corpus has no documents yet: import some on the Corpus Import page, "
                                          "then build its index here."]
    assert not [b for b in at.button if b.key == "index_build"]


def test_home_names_the_demo_index_model_verbatim() -> None:
    """Home wrote the model of the demo's index into Markdown as it was: a local model folder such as
    '/models/**tiny**_[v2](x)' showed in bold with a link."""
    from services.demo import DEMO_CORPUS_NAME

    app = str(PAGES.parent / "app.py")
    no_exceptions(AppTest.from_file(app, default_timeout=TIMEOUT).run())  # loads the demo corpus
    store = page_store()
    corpus = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
    run = db.create_embedding_run(store, corpus.id, model_name="/models/**tiny**_[v2](x)", layer=1, pooling="last",
                                  n_heads=2, head_dim=2, dim=4)
    db.finish_embedding_run(store, run.id)
    store.close()
    at = AppTest.from_file(app, default_timeout=TIMEOUT).run()
    no_exceptions(at)
    assert [s.value for s in at.success] == [
        rf"The demo corpus has a finished index (#{run.id}: /models/\*\*tiny\*\*\_\[v2\]\(x\), layer 1): go straight "
        "to Compare."]
