"""The Compare page on a small indexed corpus, for the page tests of its result lists and evidence table: documents
written in a tiny GPT-2's words, indexed with it (no real model), and the page run with Compare clicked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import db

COMPARE_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "5_Compare.py")
#: Texts in the tiny model's vocabulary (tests.support.tiny_models), one per document in turn.
WORDS = ["the cat sat", "lighthouse tempeh", "the lighthouse", "cat tempeh sat", "sat the cat", "tempeh the"]


def indexed_corpus(name: str, titles: list[str], labels: list[str], model: Path) -> int:
    """A corpus of these documents (texts from :data:`WORDS`) in the database ``MRAG_DATABASE_URL`` names, indexed
    with the tiny model at ``model``, and a query set of one query whose ground truth is the first two documents
    (so k = 2); the corpus id."""
    from mrag_core.models.loader import load_model
    from services.workflows.indexing import build_embedding_run

    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.create_corpus(store, name)
    ids = db.add_documents(store, corpus.id, [{"title": t, "text": WORDS[i % len(WORDS)], "label": lab}
                                              for i, (t, lab) in enumerate(zip(titles, labels))]).document_ids
    qs = db.create_query_set(store, corpus.id, "Q")
    db.add_queries(store, qs.id, [{"text": "the cat sat. the lighthouse.", "ground_truth": ids[:2]}])
    build_embedding_run(store, corpus.id, load_model(str(model), device="cpu"), layer=-1)
    store.close()
    return corpus.id


FIVE_STRATEGIES = ["standard", "mrag", "split", "fusion", "fusion-mrag"]
"""Five lists, for the layout tests (the page preselects three: Standard, MRAG and the recommended strategy)."""


def compare(corpus_id: int | None = None, per_row: int | None = None,
            strategies: list[str] | None = FIVE_STRATEGIES) -> Any:
    """The Compare page (an AppTest) on corpus ``corpus_id`` (the page's own choice when None), ``per_row`` lists to
    a row when given, ``strategies`` chosen (None: the page's preselection), after a click on Compare; fails on an
    exception on the page."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(COMPARE_PAGE, default_timeout=120)
    if corpus_id is not None:
        at.session_state["corpus_id"] = corpus_id
    at.run()
    if per_row is not None:
        at.session_state["compare_per_row"] = per_row
    if strategies is not None:
        at.multiselect(key="compare_strategies").set_value(list(strategies))
    at.button(key="compare_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at
