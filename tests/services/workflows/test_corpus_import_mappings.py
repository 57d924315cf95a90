"""``cw.read_upload`` reads tables with one column mapping per file (tables with different columns, as the Corpus
Import page now maps them); a count of mappings that does not match the files is a clear error."""

from __future__ import annotations

import pytest

from services.ingest import ColumnMapping
from services.workflows import corpus as cw

NEWS = ("news.csv", b"headline,body,topic\nLate goal,The striker scored late.,sport\n")
NOTES = ("notes.csv", b"name,content,category\nPasta,Boil the pasta.,cooking\n")


def test_one_mapping_per_file() -> None:
    read = cw.read_upload("table", [NEWS, NOTES], mapping=[ColumnMapping("body", "headline", "topic"),
                                                           ColumnMapping("content", "name", "category")])
    assert [(r.title, r.text, r.label) for r in read.records] == [
        ("Late goal", "The striker scored late.", "sport"), ("Pasta", "Boil the pasta.", "cooking")]
    assert not read.errors
    one = cw.read_upload("table", [NEWS, NOTES], mapping=ColumnMapping("body", "headline", "topic"))
    assert [r.text for r in one.records] == ["The striker scored late."] and one.errors  # notes.csv has no 'body'


def test_a_mapping_count_that_does_not_match_the_files_is_refused() -> None:
    with pytest.raises(ValueError, match="1 column mapping given for 2 files; give one per file."):
        cw.read_upload("table", [NEWS, NOTES], mapping=[ColumnMapping("body")])
