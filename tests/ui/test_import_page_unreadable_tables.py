"""Corpus Import: one of several uploaded tables cannot be read (a byte-order mark over bytes that are not UTF-8, a
PNG renamed .csv, a CSV quote never closed). The page refused the whole upload (no preview, no Import button); now,
as ``mrag-studio import`` does, the readable tables are previewed and imported, each unreadable one is
named with why in the preview's issues (a left-out file: the counts add up, ready + skipped = read) and a warning
above the mappings, and nothing of it is written."""

from __future__ import annotations

from pathlib import Path

import pytest

import db
from tests.support.apptest import import_page, no_exceptions, page_store
from ui.render import md_plain

IMPORT_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Corpus_Import.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py

NEWS = b"headline,body,topic\nLate goal,The striker scored late.,sport\nRain,Storms on Sunday.,weather\n"
NOTES = b"name,content,category\nPasta,Boil the pasta for nine minutes.,cooking\n"
BAD_ENCODING = b"\xef\xbb\xbftitle,text\nA,caf\xe9 au lait\n"  # a UTF-8 byte-order mark, then Latin-1 bytes
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"  # an image renamed .csv
UNCLOSED = b'title,text\nA,First.\n"B,Second.\nC,Third.\n'

# the first bad byte, \xe9, is at 3 (the mark) + len("title,text\nA,caf") = 3 + 16
ENCODING_WHY = "starts with a utf-8-sig byte-order mark but is not valid utf-8-sig (byte 19)"
PNG_WHY = "this is a PNG image, not a text file"
UNCLOSED_WHY = ('line 3: a quoted field is never closed (a " without its closing "): the rest of the file would be '
                "read as one value")


def _upload(*files: tuple[str, bytes]):
    at = import_page(IMPORT_PAGE)
    at.file_uploader(key="imp_upload_table").set_value([(n, d, "text/csv") for n, d in files]).run()
    no_exceptions(at)
    return at


def _issues(at) -> list[tuple[str, str, str]]:
    return [tuple(row) for row in at.dataframe[1].value[["severity", "location", "message"]].itertuples(index=False)]


def test_the_readable_tables_are_previewed_and_imported_and_the_unreadable_ones_named() -> None:
    at = _upload(("news.csv", NEWS), ("latin.csv", BAD_ENCODING), ("image.csv", PNG), ("notes.csv", NOTES),
                 ("quote.csv", UNCLOSED))
    assert not at.error
    assert [w.value for w in at.warning[:3]] == [
        f"This file cannot be read: {md_plain(f'{name}: {why}')}. It is left out: the other files are previewed "
        "and imported without it (fix it and upload it again to import it too)."
        for name, why in (("latin.csv", ENCODING_WHY), ("image.csv", PNG_WHY), ("quote.csv", UNCLOSED_WHY))]
    # the two readable tables have different columns: a mapping each, guessed from its own columns
    assert [m.value for m in at.markdown if m.value.startswith("**Column mapping")] == [
        f"**Column mapping of '{md_plain(name)}'**" for name in ("news.csv", "notes.csv")]
    assert [at.selectbox(key=f"imp_map_text{s}").value for s in ("", "_1")] == ["body", "content"]
    # 3 rows read (2 + 1; the left-out files give none), 3 ready, 0 skipped: 3 + 0 = 3
    assert at.warning[3].value == ("3 documents ready, 0 skipped of 3 read, 3 errors, 0 warnings. Rows and files "
                                   "with errors are left out of the import.")
    assert list(at.dataframe[0].value["text"]) == ["The striker scored late.", "Storms on Sunday.",
                                                   "Boil the pasta for nine minutes."]
    assert _issues(at) == [("error", name, f"the file cannot be read, so it is left out: {why}")
                           for name, why in (("latin.csv", ENCODING_WHY), ("image.csv", PNG_WHY),
                                             ("quote.csv", UNCLOSED_WHY))]
    assert at.button(key="imp_go").label == "Import 3 documents"

    at.text_input(key="imp_new_name").set_value("Mixed").run()
    at.button(key="imp_go").click().run()
    no_exceptions(at)
    store = page_store()
    docs = db.list_documents(store, db.get_corpus_by_name(store, "Mixed").id).items
    assert [(d.title, d.label) for d in docs] == [("Late goal", "sport"), ("Rain", "weather"), ("Pasta", "cooking")]
    assert sorted(c.name for c in db.list_categories(store, docs[0].corpus_id)) == ["cooking", "sport", "weather"]
    store.close()


def test_an_unreadable_first_table_leaves_the_others_one_shared_mapping() -> None:
    """The CLI refuses an upload whose first table cannot be read; the page reads the others, and two tables with
    the same columns still share one mapping (the unreadable one is not compared)."""
    other = NEWS.replace(b"Late goal", b"Early goal").replace(b"late", b"early").replace(b"Storms", b"Sun")
    at = _upload(("quote.csv", UNCLOSED), ("a.csv", NEWS), ("b.csv", other))
    assert not at.error
    assert [m.value for m in at.markdown if m.value.startswith("**Column mapping")] == ["**Column mapping**"]
    at.selectbox(key="imp_map_label").set_value("(none)").run()  # the shared mapping reaches both readable files
    no_exceptions(at)
    assert list(at.dataframe[0].value["label"]) == ["", "", "", ""]
    assert list(at.dataframe[0].value["title"]) == ["Late goal", "Rain", "Early goal", "Rain"]
    assert _issues(at) == [("error", "quote.csv", f"the file cannot be read, so it is left out: {UNCLOSED_WHY}")]
    assert at.button(key="imp_go").label == "Import 4 documents"


def test_when_no_table_can_be_read_each_is_named_and_there_is_no_preview() -> None:
    at = _upload(("image.csv", PNG), ("quote.csv", UNCLOSED))
    assert [e.value for e in at.error] == [f"This file cannot be read: {md_plain(f'{name}: {why}')}"
                                           for name, why in (("image.csv", PNG_WHY), ("quote.csv", UNCLOSED_WHY))]
    assert not at.dataframe and not at.button
    assert [c.name for c in db.list_corpora(page_store())] == ["MRAG Studio demo"]
