"""Corpus Import page: a corpus another process (or session) is still importing is not shown as a corpus (issue 32
item 2: a web import went on after its tab was closed while other sessions saw its corpus with 0 documents)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db

IMPORT_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Corpus_Import.py")
OWNER = "gpu-box pid 4242 #0badc0de"
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_a_corpus_being_imported_elsewhere_is_hidden_until_published() -> None:
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()  # loads the demo corpus
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    hidden = db.begin_import(store, "Half", OWNER)
    db.add_import_documents(store, hidden, OWNER, [{"title": f"D{i}", "text": f"document {i}"} for i in range(3)])

    at.radio(key="imp_target").set_value("An existing corpus").run()
    assert not at.exception
    assert not any("Half" in str(option) for option in at.selectbox(key="imp_existing").options)

    at.radio(key="imp_target").set_value("A new corpus").run()
    at.file_uploader(key="imp_upload_table").set_value(("news.csv", b"title,text\nA,a text\n", "text/csv")).run()
    at.text_input(key="imp_new_name").set_value("Half").run()
    at.button(key="imp_go").click().run()
    assert not at.exception
    assert "A corpus named 'Half' is being imported now \\(gpu\\-box pid 4242\\)" in at.error[0].value  # escaped

    db.finish_import(store, hidden, OWNER)  # that import ends: the corpus shows, whole
    at.radio(key="imp_target").set_value("An existing corpus").run()
    assert any("Half" in str(option) for option in at.selectbox(key="imp_existing").options)
    assert db.get_corpus_by_name(store, "Half").n_documents == 3
    store.close()
