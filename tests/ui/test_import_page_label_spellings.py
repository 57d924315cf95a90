"""Corpus Import: a pasted table added to an existing corpus whose label differs from one of the corpus' categories
only in case ('PHYSICS' for 'Physics') is imported under that category, and the preview's issues say so; it made a
second category, which pre-annotation then refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db

IMPORT_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Corpus_Import.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_a_label_in_another_case_joins_the_existing_category() -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    target = db.create_corpus(store, "Science")
    db.add_documents(store, target.id, [{"title": "old", "text": "Electrons and photons.", "label": "Physics"}])
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    at.text_area(key="imp_paste").set_value("title,text,label\nNew,Quarks and gluons.,PHYSICS\n")
    at.selectbox(key="imp_paste_fmt").set_value("csv")
    at.run()
    at.radio(key="imp_target").set_value("An existing corpus").run()
    at.selectbox(key="imp_existing").set_value(next(c for c in db.list_corpora(store) if c.name == "Science")).run()
    assert not at.exception, [e.value for e in at.exception]
    issues = at.dataframe[1].value
    assert list(zip(issues["severity"], issues["location"], issues["message"])) == [
        ("warning", "pasted.csv row 1", "label 'PHYSICS' is imported as 'Physics': they differ only in case or "
                                        "spacing, which the annotators cannot tell apart")]
    at.button(key="imp_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [c.name for c in db.list_categories(store, target.id)] == ["Physics"]
    assert sorted(d.label for d in db.list_documents(store, target.id).items) == ["Physics", "Physics"]
    store.close()
