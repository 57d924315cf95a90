"""Annotate & Review, review queue: the caption under the document says whose words are highlighted - the
suggested category's, else the current label's - and only when some word is. It always said "the suggested
category's", also on a document without a suggestion (the label's words were highlighted) and on one where no
word was highlighted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db

REVIEW_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "2_Annotate_and_Review.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _highlight_captions(at: AppTest) -> list[str]:
    return [c.value for c in at.caption if c.value.startswith("Highlighted")]


def _marked(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("<p>")]


def test_the_caption_names_whose_words_are_highlighted_and_only_when_some_are() -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    c = db.create_corpus(store, "Space mix")
    ids = list(db.add_documents(store, c.id, [
        {"title": "Moon", "text": "Rockets fly to space.", "label": "space"},  # no suggestion: the label's words
        {"title": "Huge", "text": "word " * 50, "label": "food"},  # nothing to highlight
        {"title": "Soup", "text": "A food blog about soup."},  # a suggestion: its words
    ]).document_ids)
    cats = {x.name: x.id for x in db.list_categories(store, c.id)}
    db.add_suggestions(store, [{"document_id": ids[2], "agent": "llm", "model_version": "m", "status": "ok",
                                "category_id": cats["food"], "score": 0.9}])
    store.close()
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = c.id
    at.run()
    at.radio(key="ar_view").set_value("Review queue").run()
    assert _marked(at) == ["<p>Rockets fly to <mark>space</mark>.</p>"]
    assert _highlight_captions(at) == ["Highlighted: words of the current label's name and description."]
    [b for b in at.button if b.label == "Skip"][0].click().run()
    assert "<mark>" not in _marked(at)[0] and _highlight_captions(at) == []
    [b for b in at.button if b.label == "Skip"][0].click().run()
    assert _marked(at) == ["<p>A <mark>food</mark> blog about soup.</p>"]
    assert _highlight_captions(at) == ["Highlighted: words of the suggested category's name and description."]
