"""Annotate and Review's Find similar view: the label to give the chosen document's neighbours starts as that
document's own label, and follows the document until the user picks another."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.apptest import no_exceptions, page_store

REVIEW_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "2_Annotate_and_Review.py")

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_find_similar_label_defaults_to_the_chosen_documents_label() -> None:
    store = page_store()
    c = db.create_corpus(store, "Kitchen and pitch")
    # the label box listed "cooking" first and showed it for every document, a football one included
    db.add_categories(store, c.id, ["sport", "cooking", "travel"])
    ids = db.add_documents(store, c.id, [
        {"title": "Final", "text": "The football team won the final with two goals.", "label": "sport"},
        {"title": "Bread", "text": "Knead the dough and bake the bread in a hot oven.", "label": "cooking"},
        {"title": "Cake", "text": "Whisk the eggs and sugar, then bake the cake.", "label": "cooking"},
        {"title": "Unsorted", "text": "A train through the mountains to the coast."},
    ]).document_ids  # fmt: skip
    store.close()
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=120)
    at.session_state["corpus_id"] = c.id
    at.run()
    at.radio(key="ar_view").set_value("Find similar").run()
    at.toggle(key="fs_on").set_value(True).run()
    no_exceptions(at)
    assert at.selectbox(key="fs_doc").value.id == ids[0]
    assert at.selectbox(key="fs_label").options == ["cooking", "sport", "travel"]
    assert at.selectbox(key="fs_label").value == "sport"
    at.slider(key="fs_k").set_value(2).run()  # another neighbour count, the same document: the same label
    assert at.selectbox(key="fs_label").value == "sport"
    at.selectbox(key="fs_doc").select_index(1).run()  # another document: its label
    assert at.selectbox(key="fs_label").value == "cooking"
    at.selectbox(key="fs_doc").select_index(0).run()
    assert at.selectbox(key="fs_label").value == "sport"
    at.selectbox(key="fs_doc").select_index(3).run()  # unlabelled: the first category, as before
    assert at.selectbox(key="fs_label").value == "cooking"
    no_exceptions(at)
