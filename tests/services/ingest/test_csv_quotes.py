"""CSV quoting in services.ingest.tabular: a quoted field that is never closed refuses the file with the line where
it starts (the lenient csv reader silently read the rest of the file, or the lines up to the next quote, as one
value: the user saw "row 1: empty text" or one giant row); valid quoted multi-line fields and escaped quotes ("")
still read. The expected values are written out by hand."""

from __future__ import annotations

import pytest

from services.ingest.records import IngestError
from services.ingest.tabular import ColumnMapping, read_table, sniff_columns

MAP = ColumnMapping(text="text", title="title")
UNCLOSED = 'a quoted field is never closed (a " without its closing ")'
TO_THE_END = f"{UNCLOSED}: the rest of the file would be read as one value"


@pytest.mark.parametrize(
    "data,message",
    [
        # the QA case: the title of line 3 opens a quote; its text column stayed empty ("row 2: empty text")
        (b'title,text\nA,first text\n"B,second text\nC,third text\nD,fourth text\n', f"line 3: {TO_THE_END}"),
        # in the text column: one giant row 2 of everything after it
        (b'title,text\nA,first text\nB,"second text\nC,third text\nD,fourth text\n', f"line 3: {TO_THE_END}"),
        # on the last line, with and without a final line break
        (b'title,text\nA,first text\nB,"second text\n', f"line 3: {TO_THE_END}"),
        (b'title,text\nA,first text\nB,"second text', f"line 3: {TO_THE_END}"),
        # in the header
        (b'"title,text\nA,first text\n', f"line 1: {TO_THE_END}"),
        # a stray quote on line 3 pairs with the opening quote of line 5: lines 3 to 5 became one value "ok"
        (b'title,text\nA,first text\nB,"second text\nC,third text\nD,"fifth" text\nE,sixth text\n',
         f'line 3: {UNCLOSED}: the text from there to the " on line 5 would be read as one value'),
        # ";" sniffed as the delimiter, Windows line breaks
        (b'title;text\r\nA;first text\r\nB;"second text\r\nC;third text\r\n', f"line 3: {TO_THE_END}"),
        # a doubled quote inside the field is not its closing one
        (b'title,text\nA,"first ""quoted"" text\nB,second text\n', f"line 2: {TO_THE_END}"),
    ],
)
def test_unclosed_quote_refuses_the_file_naming_the_line_where_it_starts(data: bytes, message: str) -> None:
    with pytest.raises(IngestError) as raised:
        sniff_columns(data, "csv", "notes.csv")
    assert str(raised.value) == f"notes.csv: {message}"
    preview = read_table(data, "csv", MAP, "notes.csv")
    assert preview.records == [] and preview.n_rows_read == 0
    assert [(i.severity, i.where, i.message) for i in preview.issues] == [("error", "notes.csv", message)]


def test_quoted_multi_line_fields_and_escaped_quotes_still_read() -> None:
    data = (
        b'title,text\n'
        b'"Say ""hi""","He said ""hello"", then left."\n'
        b'Poem,"First line,\nsecond line\n\nthird, after a blank line"\n'
        b'"Two\nlines",plain text with a "quote" inside\n'
        b'Ends,"a quote at the end """\n'
        b'Last,"""quoted"" start"'  # no final line break
    )
    assert sniff_columns(data, "csv", "ok.csv") == ["title", "text"]
    preview = read_table(data, "csv", MAP, "ok.csv")
    assert preview.issues == []
    assert [(r.title, r.text) for r in preview.records] == [
        ('Say "hi"', 'He said "hello", then left.'),
        ("Poem", "First line,\nsecond line\n\nthird, after a blank line"),
        ("Two lines", 'plain text with a "quote" inside'),
        ("Ends", 'a quote at the end "'),
        ("Last", '"quoted" start'),
    ]
    assert [r.source for r in preview.records] == [f"ok.csv row {n}" for n in range(1, 6)]


def test_windows_line_breaks_in_a_quoted_field_and_space_after_its_closing_quote_still_read() -> None:
    data = b'title,text\r\nA,"one\r\ntwo" \r\nB,"three"\r\n'
    preview = read_table(data, "csv", MAP, "win.csv")
    assert preview.issues == []
    assert [(r.title, r.text) for r in preview.records] == [("A", "one\ntwo"), ("B", "three")]  # the text is stripped


def test_a_quote_inside_an_unquoted_value_is_text_as_before() -> None:
    """Only a quote that starts a value opens a quoted field (as the csv reader reads it): these files were read
    the same before the check."""
    data = b'title,text\nA,5" screen\nB,"closed"tail on one line\n'
    preview = read_table(data, "csv", MAP, "inch.csv")
    assert preview.issues == []
    assert [(r.title, r.text) for r in preview.records] == [("A", '5" screen'), ("B", "closedtail on one line")]
