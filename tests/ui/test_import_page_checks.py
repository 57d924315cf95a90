"""The Corpus Import page says what is wrong before anything is imported: a CSV whose quoted field is never closed
is refused with the line where it starts, no preview and no Import button (the message is escaped Markdown:
``md_plain``). AppTest runs against a fresh store per
test (``fresh_env``, tests/ui/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from ui.render import md_plain

ROOT = Path(__file__).resolve().parents[2]
IMPORT_PAGE = str(ROOT / "pages" / "1_Corpus_Import.py")
UNCLOSED = 'line 3: a quoted field is never closed (a " without its closing "): the rest of the file would be read ' \
           "as one value"

pytestmark = pytest.mark.usefixtures("fresh_env")


def _store() -> db.Store:
    """The store the page under test uses (``MRAG_DATABASE_URL``, set by ``fresh_env``)."""
    return db.open_store(os.environ["MRAG_DATABASE_URL"])


def _page() -> AppTest:
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    _no_exceptions(at)
    return at


def _no_exceptions(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def test_an_unclosed_quote_in_an_uploaded_csv_is_refused_with_its_line() -> None:
    at = _page()
    data = b'title,text\nA,First note.\n"B,Second note.\nC,Third note.\n'
    at.file_uploader(key="imp_upload_table").set_value(("notes.csv", data, "text/csv")).run()
    _no_exceptions(at)
    assert [e.value for e in at.error] == [f"This file cannot be read: {md_plain(f'notes.csv: {UNCLOSED}')}"]
    assert not at.dataframe and not at.button  # no preview, nothing to import
    assert [c.name for c in db.list_corpora(_store())] == ["MRAG Studio demo"]


def test_an_unclosed_quote_in_pasted_csv_is_refused_and_the_fixed_text_previews() -> None:
    at = _page()
    at.text_area(key="imp_paste").set_value('title,text\nA,First note.\nB,"Second note.\nC,Third note.\n').run()
    _no_exceptions(at)
    assert [e.value for e in at.error] == [f"This file cannot be read: {md_plain(f'pasted.csv: {UNCLOSED}')}"]
    assert not at.button
    at.text_area(key="imp_paste").set_value('title,text\nA,First note.\nB,"Second ""quoted""\nnote."\n'
                                            "C,Third note.\n").run()
    _no_exceptions(at)
    assert not at.error
    assert list(at.dataframe[0].value["text"]) == ["First note.", 'Second "quoted"\nnote.', "Third note."]
    assert at.button(key="imp_go").label == "Import 3 documents"
