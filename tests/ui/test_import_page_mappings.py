"""Corpus Import: two uploaded tables with different column names. The page guessed one column mapping from the
first table and applied it to every file, so the second was refused whole ('column ... not found'); each table's
mapping is now guessed from its own columns (as ``mrag-studio import`` does) and shown per file, so each
can be corrected. Tables with the same columns still share one mapping."""

from __future__ import annotations

from pathlib import Path

import pytest

import db
from tests.support.apptest import import_page, no_exceptions, page_store
from ui.render import md_plain

IMPORT_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Corpus_Import.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py

NEWS = b"headline,body,topic\nLate goal,The striker scored late.,sport\n"
NOTES = b"name,content,category\nPasta,Boil the pasta for nine minutes.,cooking\nSoup,Simmer the soup.,cooking\n"


def _upload(*files: tuple[str, bytes]):
    at = import_page(IMPORT_PAGE)
    at.file_uploader(key="imp_upload_table").set_value([(n, d, "text/csv") for n, d in files]).run()
    no_exceptions(at)
    return at


def _boxes(at, suffix: str) -> list[str]:
    return [at.selectbox(key=f"imp_map_{k}{suffix}").value for k in ("text", "title", "label")]


def test_each_table_gets_its_own_mapping_and_both_are_imported() -> None:
    at = _upload(("news.csv", NEWS), ("notes*.csv", NOTES))
    assert _boxes(at, "") == ["body", "headline", "topic"]
    assert _boxes(at, "_1") == ["content", "name", "category"]
    headings = [m.value for m in at.markdown if m.value.startswith("**Column mapping")]
    assert headings == [f"**Column mapping of '{md_plain(name)}'**" for name in ("news.csv", "notes*.csv")]
    assert not at.error
    preview = at.dataframe[0].value
    assert list(preview["text"]) == ["The striker scored late.", "Boil the pasta for nine minutes.",
                                     "Simmer the soup."]
    assert list(preview["label"]) == ["sport", "cooking", "cooking"]

    at.selectbox(key="imp_map_title_1").set_value("(none)").run()  # one file's mapping corrected, the other kept
    no_exceptions(at)
    assert _boxes(at, "") == ["body", "headline", "topic"]
    assert list(at.dataframe[0].value["title"])[0] == "Late goal"
    at.button(key="imp_go").click().run()
    no_exceptions(at)
    store = page_store()
    corpus = db.get_corpus(store, at.session_state["corpus_id"])
    docs = db.list_documents(store, corpus.id).items
    assert [d.label for d in docs] == ["sport", "cooking", "cooking"]
    # no title column for the second file: its titles come from the text, not 'Pasta' / 'Soup'
    assert [d.title for d in docs] == ["Late goal", "Boil the pasta for nine minutes.", "Simmer the soup."]
    store.close()


def test_tables_with_the_same_columns_share_one_mapping() -> None:
    at = _upload(("a.csv", NEWS), ("b.csv", NEWS.replace(b"Late goal", b"Early goal").replace(b"late", b"early")))
    assert _boxes(at, "") == ["body", "headline", "topic"]
    assert "imp_map_text_1" not in [s.key for s in at.selectbox]
    assert [m.value for m in at.markdown if m.value.startswith("**Column mapping")] == ["**Column mapping**"]
    at.selectbox(key="imp_map_label").set_value("(none)").run()
    assert list(at.dataframe[0].value["label"]) == ["", ""]
