"""The Corpus Import page says what is wrong before anything is imported: a CSV whose quoted field is never closed
is refused with the line where it starts, no preview and no Import button; a new corpus' name that exists is said
under the name field as soon as it is there, and Import is disabled while it stands (messages are escaped Markdown:
``md_plain``). AppTest runs against a fresh store per
test (``fresh_env``, tests/ui/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.apptest import import_page, no_exceptions, page_store
from ui.render import md_plain

ROOT = Path(__file__).resolve().parents[2]
IMPORT_PAGE = str(ROOT / "pages" / "1_Corpus_Import.py")
UNCLOSED = 'line 3: a quoted field is never closed (a " without its closing "): the rest of the file would be read ' \
           "as one value"

pytestmark = pytest.mark.usefixtures("fresh_env")


_store = page_store
_no_exceptions = no_exceptions


def _page() -> AppTest:
    return import_page(IMPORT_PAGE)


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


# --------------------------------------------------------------------------- the name of a new corpus

NOTES_CSV = b"title,text\nA,First note.\nB,Second note.\n"


def _taken(name: str) -> str:
    return (f"A corpus called '{md_plain(name)}' exists: choose it as the target ('An existing corpus') to add to "
            "it, or pick another name.")


def _under_the_name_field(at: AppTest) -> list[str]:
    """The errors drawn right after the name field, in its column, before any other element."""
    column = next(c for c in at.columns if any(getattr(e, "key", None) == "imp_new_name" for e in c.children.values()))
    children = list(column.children.values())
    at_field = next(i for i, e in enumerate(children) if getattr(e, "key", None) == "imp_new_name")
    after = children[at_field + 1:]
    errors = [e.value for e in after if e.type == "error"] if after and after[0].type == "error" else []
    return errors


def test_a_new_corpus_name_that_exists_is_said_under_the_field_and_disables_import() -> None:
    """The QA case: the clash was only reported after clicking Import ("Nothing was imported: A corpus named 'Mini'
    already exists.")."""
    store = _store()
    db.create_corpus(store, "Mini")
    at = _page()
    at.file_uploader(key="imp_upload_table").set_value(("notes.csv", NOTES_CSV, "text/csv")).run()
    _no_exceptions(at)
    assert at.text_input(key="imp_new_name").value == "notes"
    assert not at.error and not at.button(key="imp_go").disabled

    at.text_input(key="imp_new_name").set_value(" Mini ").run()  # the store strips names: this is 'Mini'
    _no_exceptions(at)
    assert [e.value for e in at.error] == [_taken("Mini")]
    assert _under_the_name_field(at) == [_taken("Mini")]
    button = at.button(key="imp_go")
    assert button.label == "Import 2 documents" and button.disabled

    at.text_input(key="imp_new_name").set_value("mini").run()  # names are compared exactly
    assert not at.error and not at.button(key="imp_go").disabled

    at.text_input(key="imp_new_name").set_value("Mini").run()
    assert [e.value for e in at.error] == [_taken("Mini")] and at.button(key="imp_go").disabled
    at.radio(key="imp_target").set_value("An existing corpus").run()  # the way the message points to
    assert not at.error and not at.button(key="imp_go").disabled

    at.radio(key="imp_target").set_value("A new corpus").run()
    at.text_input(key="imp_new_name").set_value("Notes").run()
    assert not at.error
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert db.get_corpus_by_name(store, "Notes").n_documents == 2
    assert db.get_corpus_by_name(store, "Mini").n_documents == 0


def test_a_name_taken_from_the_uploaded_file_is_checked_too() -> None:
    store = _store()
    db.create_corpus(store, "news")
    at = _page()
    at.file_uploader(key="imp_upload_table").set_value(("news.csv", NOTES_CSV, "text/csv")).run()
    _no_exceptions(at)
    assert at.text_input(key="imp_new_name").value == "news"
    assert [e.value for e in at.error] == [_taken("news")] and at.button(key="imp_go").disabled
