"""``cw.read_upload`` with no column mapping (None) for a table that cannot be read, as the Corpus Import page passes
one: the other tables are read, the unreadable one is left out with one error naming it and why, and the counts add
up (ready + skipped = read). A table given None whose columns can be read is refused: it needs a mapping."""

from __future__ import annotations

import pytest

from services.ingest import ColumnMapping, ImportIssue
from services.workflows import corpus as cw

NEWS = ("news.csv", b"headline,body,topic\nLate goal,The striker scored late.,sport\n,,x\n")
BINARY = ("scan.csv", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")


def test_an_unreadable_table_without_a_mapping_is_left_out_and_named() -> None:
    read = cw.read_upload("table", [BINARY, NEWS], mapping=[None, ColumnMapping("body", "headline", "topic")])
    assert [(r.title, r.text, r.label) for r in read.records] == [("Late goal", "The striker scored late.", "sport")]
    assert read.issues == [
        ImportIssue.of_file("scan.csv", "the file cannot be read, so it is left out: this is a PDF document; export "
                                        "its text first, not a text file"),
        ImportIssue("row 2", "empty text (column 'body')", "error", source="news.csv")]
    assert (len(read.records), read.n_skipped, read.n_rows_read) == (1, 1, 2)
    ready = cw.prepare_import(read)
    assert len(ready.records) + ready.n_skipped == ready.n_rows_read == 2
    assert ready.summary() == "1 document ready, 1 skipped of 2 read, 2 errors, 0 warnings"


def test_a_readable_table_without_a_mapping_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^news.csv needs a column mapping \(its columns: headline, body, topic\)\.$"):
        cw.read_upload("table", [NEWS], mapping=[None])
