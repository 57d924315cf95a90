"""Corpus Import: the preview's issue list names the file of each issue (a table's row or line after it, a ZIP
member after its archive), so the problems of several tables uploaded at once can be told apart; it said only
``row 1`` for a row of either table. File names are data: shown verbatim in the list (a dataframe renders no
Markdown) and escaped where the page writes them as Markdown."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from tests.support.apptest import import_page, no_exceptions
from ui.render import md_plain

IMPORT_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Corpus_Import.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py

NEWS = b"headline,body,topic\n,,sport\nRain,Storms on Sunday.,weather\n"
ODD_NAME = "**odd** [x](http://example.test).csv"  # Markdown in a file name
NOTES = b"name,content,category\nPasta,Boil the pasta for nine minutes.,cooking\nEmpty,   ,cooking\n"


def _issues(at) -> list[tuple[str, str, str]]:
    return [tuple(row) for row in at.dataframe[1].value[["severity", "location", "message"]].itertuples(index=False)]


def test_a_two_table_upload_names_each_table_in_the_issue_list() -> None:
    at = import_page(IMPORT_PAGE)
    at.file_uploader(key="imp_upload_table").set_value(
        [("news.csv", NEWS, "text/csv"), (ODD_NAME, NOTES, "text/csv")]).run()
    no_exceptions(at)
    assert _issues(at) == [
        ("error", "news.csv row 1", "empty text (column 'body')"),
        ("error", f"{ODD_NAME} row 2", "empty text (column 'content')"),
    ]
    # the name is escaped where the page writes it as Markdown (the heading of its own column mapping)
    assert f"**Column mapping of '{md_plain(ODD_NAME)}'**" in [m.value for m in at.markdown]
    assert not any(ODD_NAME in m.value for m in at.markdown)
    assert at.button(key="imp_go").label == "Import 2 documents"


def test_a_zip_upload_names_the_archive_and_the_member_in_the_issue_list() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("reviews/data/a.txt", "Fine text.")
        zf.writestr("reviews/data/b.txt", "   ")
        zf.writestr("reviews/more/c.txt", b"\x00\x01binary\x00")
    at = import_page(IMPORT_PAGE)
    at.radio(key="imp_kind").set_value("zip").run()
    at.file_uploader(key="imp_upload_zip").set_value(("reviews.zip", buf.getvalue(), "application/zip")).run()
    no_exceptions(at)
    assert _issues(at) == [
        ("error", "reviews.zip:data/b.txt", "the file is empty"),
        ("error", "reviews.zip:more/c.txt", "the file contains NUL bytes: it looks binary, not text"),
    ]
    assert list(at.dataframe[0].value["source"]) == ["reviews.zip:data/a.txt"]  # named as a document is
