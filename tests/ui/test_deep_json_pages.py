"""JSON nested too deeply for Python's parser (``[`` x 100000) on the pages: the Corpus Import page and the Query
Builder's Import tab showed a RecursionError; now a whole file is refused naming the file, line and column, and a
JSON Lines line is one row error of the preview while the other rows import."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.apptest import import_page, no_exceptions, page_store
from ui.render import md_plain

ROOT = Path(__file__).resolve().parents[2]
IMPORT_PAGE = str(ROOT / "pages" / "1_Corpus_Import.py")
QUERY_PAGE = str(ROOT / "pages" / "8_Query_Builder.py")
DEEP = "[" * 100_000 + "]" * 100_000
TOO_DEEP = "arrays or objects nested more than 500 levels deep"

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_a_json_table_nested_too_deeply_is_refused_with_its_line_on_the_import_page() -> None:
    at = import_page(IMPORT_PAGE)
    at.file_uploader(key="imp_upload_table").set_value(("deep.json", DEEP.encode(), "application/json")).run()
    no_exceptions(at)
    assert [e.value for e in at.error] == [
        f"This file cannot be read: {md_plain(f'deep.json: invalid JSON at line 1, column 501: {TOO_DEEP}')}"]
    assert not at.dataframe and not at.button  # no preview, nothing to import


def test_a_jsonl_line_nested_too_deeply_is_a_row_error_and_the_other_rows_import() -> None:
    at = import_page(IMPORT_PAGE)
    data = ('{"title": "Rivers", "text": "Rivers carry water to the sea.", "label": "water"}\n' + DEEP + "\n").encode()
    at.file_uploader(key="imp_upload_table").set_value(("docs.jsonl", data, "application/json")).run()
    no_exceptions(at)
    assert not at.error
    issues = [tuple(r) for r in at.dataframe[1].value[["severity", "location", "message"]].itertuples(index=False)]
    assert issues == [("error", "docs.jsonl line 2", f"invalid JSON at column 501: {TOO_DEEP}")]
    at.text_input(key="imp_new_name").set_value("Deep").run()
    at.button(key="imp_go").click().run()
    no_exceptions(at)
    store = page_store()
    corpus = db.get_corpus_by_name(store, "Deep")
    assert [d.title for d in db.list_documents(store, corpus.id, limit=None).items] == ["Rivers"]
    store.close()


def test_a_query_file_nested_too_deeply_is_refused_with_its_line_on_the_query_builder() -> None:
    store = page_store()
    corpus = db.create_corpus(store, "Sea")
    db.add_documents(store, corpus.id, [{"title": "Rivers", "text": "Rivers carry water to the sea."}])
    store.close()
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus.id
    at.run()
    at.file_uploader(key="qb_imp_file").set_value(("queries.json", DEEP.encode(), "application/json")).run()
    at.text_input(key="qb_imp_name").set_value("Deep queries")
    at.button(key="qb_imp_go").click().run()
    no_exceptions(at)
    assert [e.value for e in at.error] == [
        f"Nothing was imported: {md_plain(f'queries.json: invalid JSON at line 1, column 501: {TOO_DEEP}')}"]
    store = page_store()
    assert db.list_query_sets(store, corpus.id) == []
    store.close()
