"""Annotate & Review: the settings of each view (the review queue's filters, the bulk view's, the pre-annotation's
batch size and scope) survive a switch to another view and back. Streamlit drops the value of a widget that a run
does not draw, so they came back as their defaults: an annotator filtering the queue to "food, without a human
decision" who accepted a few suggestions in Bulk accept came back to the whole corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db

REVIEW_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "2_Annotate_and_Review.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _queue_caption(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Document "))


def test_each_views_settings_survive_a_switch_to_another_view() -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    c = db.create_corpus(store, "Space mix")
    db.add_documents(store, c.id, [{"title": "Moon", "text": "Apollo moon rockets", "label": "space"},
                                   {"title": "Bread", "text": "Sourdough bread baking", "label": "food"},
                                   {"title": "Soup", "text": "Tomato soup recipe"},
                                   {"title": "Stew", "text": "Beef stew"}])
    store.close()
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = c.id
    at.run()
    at.number_input(key="pa_batch").set_value(4).run()
    at.radio(key="pa_undecided").set_value(False).run()  # all 4, not only the 2 without a label
    at.radio(key="ar_view").set_value("Review queue").run()
    assert _queue_caption(at).startswith("Document 1 of 4 in the queue")
    at.checkbox(key="rv_unrev").check().run()
    assert _queue_caption(at).startswith("Document 1 of 2 in the queue")  # Soup and Stew
    at.radio(key="ar_view").set_value("Bulk accept").run()
    at.checkbox(key="bk_unrev").uncheck().run()
    at.radio(key="ar_view").set_value("Review queue").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.checkbox(key="rv_unrev").value and _queue_caption(at).startswith("Document 1 of 2 in the queue")
    at.radio(key="ar_view").set_value("Bulk accept").run()
    assert at.checkbox(key="bk_unrev").value is False
    at.radio(key="ar_view").set_value("Pre-annotate").run()
    assert at.number_input(key="pa_batch").value == 4 and at.radio(key="pa_undecided").value is False
    assert any(m.value.startswith("**4** of 4 documents still need a suggestion") for m in at.markdown)
