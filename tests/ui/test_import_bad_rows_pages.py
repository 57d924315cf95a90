"""Rows the database cannot store, on the pages and on every backend: NUL characters in a title or label are removed
with a warning naming the row; a label over 200 characters or a lone surrogate is an error of that row and the
other rows import (the Corpus Import page refused the whole upload with "Nothing was imported: The category name is
longer than 200 characters.", and PostgreSQL raised an exception on the page showing the SQL parameters). The Query
Builder's Import tab skips a query with a NUL, naming it (PostgreSQL raised an exception there too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.apptest import import_page, no_exceptions, page_store
from tests.ui.conftest import ON_EVERY_BACKEND

ROOT = Path(__file__).resolve().parents[2]
IMPORT_PAGE = str(ROOT / "pages" / "1_Corpus_Import.py")
QUERY_PAGE = str(ROOT / "pages" / "8_Query_Builder.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py

ROWS = [
    {"title": "Rivers", "text": "Rivers carry water to the sea.", "label": "water"},
    {"title": "Nul\u0000title", "text": "Lakes hold still water.", "label": "water"},
    {"title": "Hills", "text": "Hills rise above the plain.", "label": "la\u0000nd"},
    {"title": "Long", "text": "A label far too long for a category.", "label": "x" * 250},
    {"title": "Bad label", "text": "A damaged label.", "label": "sea\ud800"},
]


@ON_EVERY_BACKEND
def test_bad_titles_and_labels_are_row_issues_on_the_import_page() -> None:
    at = import_page(IMPORT_PAGE)
    at.file_uploader(key="imp_upload_table").set_value(("docs.json", json.dumps(ROWS).encode(),
                                                        "application/json")).run()
    no_exceptions(at)
    issues = [tuple(r) for r in at.dataframe[1].value[["severity", "location", "message"]].itertuples(index=False)]
    assert issues == [
        ("warning", "docs.json row 2", "1 NUL character (\\x00) removed from the title: a database cannot store them"),
        ("warning", "docs.json row 3", "1 NUL character (\\x00) removed from the label: a database cannot store them"),
        ("error", "docs.json row 4", "the label is 250 characters long, over the 200 a category name may have; "
                                     "shorten it"),
        ("error", "docs.json row 5", "the label holds a lone surrogate (U+D800, character 4), which is not a "
                                     "character: the file is damaged there; fix or remove it"),
    ]
    at.text_input(key="imp_new_name").set_value("Geo").run()
    assert at.button(key="imp_go").label == "Import 3 documents"
    at.button(key="imp_go").click().run()
    no_exceptions(at)
    assert not at.error
    store = page_store()
    try:
        corpus = db.get_corpus_by_name(store, "Geo")
        assert [(d.title, d.label) for d in db.list_documents(store, corpus.id, limit=None).items] == [
            ("Rivers", "water"), ("Nultitle", "water"), ("Hills", "land")]
    finally:
        store.close()


@ON_EVERY_BACKEND
def test_a_query_with_a_nul_is_skipped_and_named_on_the_query_builder() -> None:
    store = page_store()
    corpus = db.create_corpus(store, "Geo")
    db.add_documents(store, corpus.id, [{"title": "Rivers", "text": "Rivers carry water to the sea."}])
    store.close()
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus.id
    at.run()
    data = json.dumps([{"text": "Where do rivers go?", "topics": ["Rivers"]},
                       {"text": "A river\u0000 story", "topics": ["Rivers"]}]).encode()
    at.file_uploader(key="qb_imp_file").set_value(("queries.json", data, "application/json")).run()
    at.text_input(key="qb_imp_name").set_value("Q")
    at.button(key="qb_imp_go").click().run()
    no_exceptions(at)
    assert [s.value for s in at.success] == ["Imported 1 query into 'Q' (0 flagged, 1 row skipped)."]
    issues = [tuple(r) for r in at.dataframe[0].value[["location", "severity", "message"]].itertuples(index=False)]
    assert issues == [("item 2", "error", "skipped: the text 'A river\\x00 story' holds a NUL character (\\x00), "
                                          "which a database cannot store")]
