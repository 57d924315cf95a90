"""Tests for services.ingest.tabular: column sniffing and row-by-row table import."""

from __future__ import annotations

import bz2
import codecs
import csv
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from services.ingest.records import IngestError
from services.ingest.tabular import (
    ColumnMapping,
    fallback_title,
    guess_format,
    read_table,
    sniff_columns,
    suggest_mapping,
)

ROWS = [
    {"title": "Mars", "body": "The fourth planet.", "category": "planets"},
    {"title": "Iron", "body": "Element 26.\nA metal.", "category": "elements"},
    {"title": "Café", "body": "A place for coffee, with “quotes”; and commas.", "category": None},
]
MAP = ColumnMapping(text="body", title="title", label="category")


def csv_bytes(rows: list[dict[str, object]], delimiter: str = ",", encoding: str = "utf-8") -> bytes:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), delimiter=delimiter)
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue().encode(encoding)


def test_guess_format() -> None:
    assert guess_format("a.JSON") == "json"
    assert guess_format("a.jsonl.bz2") == "jsonl"
    assert guess_format("x.tsv") == "csv"
    assert guess_format("x.parquet") == "parquet"
    assert guess_format("x.docx") is None


@pytest.mark.parametrize("wrap", [False, True])
def test_json_list_and_documents_wrapper(wrap: bool) -> None:
    payload = {"documents": ROWS} if wrap else ROWS
    data = json.dumps(payload).encode()
    assert sniff_columns(data, "json") == ["title", "body", "category"]
    p = read_table(data, "json", MAP, "docs.json")
    assert [r.title for r in p.records] == ["Mars", "Iron", "Café"]
    assert p.records[1].text == "Element 26.\nA metal."
    assert [r.label for r in p.records] == ["planets", "elements", None]
    assert p.records[0].source == "docs.json row 1"
    assert p.issues == [] and p.n_rows_read == 3 and p.n_skipped == 0


def test_jsonl_with_malformed_line_reports_line_number() -> None:
    lines = [json.dumps(ROWS[0]), "", "{not json", json.dumps(ROWS[1]), "[1, 2]"]
    data = "\n".join(lines).encode()
    p = read_table(data, "jsonl", MAP, "d.jsonl")
    assert [r.title for r in p.records] == ["Mars", "Iron"]
    errs = {i.location: i.message for i in p.errors}
    assert set(errs) == {"line 3", "line 5"}
    assert "invalid JSON" in errs["line 3"] and "expected an object, found a list" in errs["line 5"]
    assert p.n_rows_read == 4 and p.n_skipped == 2


@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_csv_round_trip_with_sniffed_delimiter(delimiter: str) -> None:
    data = csv_bytes(ROWS, delimiter)
    assert sniff_columns(data, "csv") == ["title", "body", "category"]
    p = read_table(data, "csv", MAP, "d.csv")
    assert [(r.title, r.text, r.label) for r in p.records] == [
        (r["title"], r["body"], r["category"]) for r in ROWS
    ]


def test_csv_in_cp1252_warns_and_keeps_accents() -> None:
    data = csv_bytes(ROWS[:1] + [{"title": "Crème", "body": "Brûlée – 5 €", "category": "food"}], encoding="cp1252")
    p = read_table(data, "csv", MAP, "old.csv")
    assert p.records[1].title == "Crème" and p.records[1].text == "Brûlée – 5 €"
    assert [i.severity for i in p.issues] == ["warning"] and "cp1252" in p.issues[0].message


def test_csv_utf8_bom_header_is_clean() -> None:
    data = codecs.BOM_UTF8 + csv_bytes(ROWS)
    assert sniff_columns(data, "csv")[0] == "title"


def test_missing_text_column_is_one_file_error_listing_columns() -> None:
    p = read_table(json.dumps(ROWS).encode(), "json", ColumnMapping(text="text"), "d.json")
    assert p.records == [] and len(p.issues) == 1
    issue = p.issues[0]
    assert issue.where == "d.json" and issue.severity == "error"
    assert "'text' not found" in issue.message and "'title', 'body', 'category'" in issue.message
    assert p.n_rows_read == 3 and p.n_skipped == 3


def test_row_level_problems() -> None:
    rows = [
        {"title": "ok", "body": "fine", "category": "a"},
        {"title": "empty", "body": "   ", "category": "a"},
        {"title": "missing", "category": "a"},
        {"title": "number", "body": 42, "category": 7},
        {"title": "list", "body": ["x"], "category": "a"},
        {"title": None, "body": "untitled text here", "category": ["a", "b"]},
        "not an object",
    ]
    p = read_table(json.dumps(rows).encode(), "json", MAP, "d.json")
    assert [r.title for r in p.records] == ["ok", "number", "untitled text here"]
    assert p.records[1].text == "42" and p.records[1].label == "7"
    assert p.records[2].label is None
    by_loc: dict[str, list[str]] = {}
    for i in p.issues:
        by_loc.setdefault(i.location, []).append(f"{i.severity}:{i.message}")
    assert by_loc["row 2"] == ["error:empty text (column 'body')"]
    assert by_loc["row 3"] == ["error:empty text (column 'body')"]
    assert by_loc["row 4"] == ["warning:text is a number; converted to text"]
    assert by_loc["row 5"] == ["error:text is a list, expected a string"]
    assert sorted(by_loc["row 6"]) == [
        "warning:empty title; used the start of the text",
        "warning:label is a list, expected a string; ignored",
    ]
    assert by_loc["row 7"] == ["error:expected an object, found a string"]
    assert p.n_rows_read == 7 and p.n_skipped == 4


def test_document_over_cap_is_rejected_with_chunking_hint() -> None:
    rows = [{"body": "x" * 2000}, {"body": "short"}]
    p = read_table(json.dumps(rows).encode(), "json", ColumnMapping(text="body"), "d.json", max_doc_bytes=1000)
    assert [r.text for r in p.records] == ["short"]
    assert p.errors[0].location == "row 1" and "chunking" in p.errors[0].message
    p2 = read_table(json.dumps(rows).encode(), "json", ColumnMapping(text="body"), "d.json", max_doc_bytes=None)
    assert len(p2.records) == 2


def test_upload_over_total_cap() -> None:
    data = json.dumps(ROWS).encode()
    p = read_table(data, "json", MAP, "big.json", max_total_bytes=10)
    assert p.records == [] and "over the" in p.issues[0].message and p.issues[0].where == "big.json"


@pytest.mark.parametrize(
    "data,fmt,fragment",
    [
        (b"", "json", "empty"),
        (b'{"a": 1}', "json", "keys 'a'"),
        (b'[{"a": 1}] [2]', "json", "invalid JSON"),
        (b"%PDF-1.4 binary", "csv", "PDF"),
        (b"anything", "xml", "unknown table format"),
    ],
)
def test_unreadable_files(data: bytes, fmt: str, fragment: str) -> None:
    with pytest.raises(IngestError, match=fragment):
        sniff_columns(data, fmt, "f")
    p = read_table(data, fmt, MAP, "f")
    assert p.records == [] and p.has_errors and fragment in p.errors[0].message


def test_bz2_json_is_decompressed() -> None:
    data = bz2.compress(json.dumps(ROWS).encode())
    assert len(read_table(data, "json", MAP, "d.json.bz2").records) == 3


def test_csv_extra_values_and_duplicate_header() -> None:
    data = b"title,body,body\nA,text a,other\nB,text b,x,EXTRA\nC,text c,y\n"
    assert sniff_columns(data, "csv") == ["title", "body", "body (2)"]
    p = read_table(data, "csv", ColumnMapping(text="body", title="title"), "d.csv")
    assert [r.text for r in p.records] == ["text a", "text c"]  # the row with an extra value is left out
    assert any("duplicate column" in i.message for i in p.warnings)
    assert [(i.where, i.severity) for i in p.errors] == [("d.csv row 2", "error")]
    assert (p.n_rows_read, p.n_skipped) == (3, 1)


def test_csv_row_with_more_values_than_the_header_is_a_row_error() -> None:
    """Issue 32: the row ``Too,many,columns,here,extra`` under ``title,text,label`` was imported as a document 'Too'
    labelled 'columns' (its values read by position, the extra ones dropped with a warning). It is an error naming
    the file, the row and the line now, and the rows around it are imported."""
    data = b"title,text,label\nFine,A fine row,good\nToo,many,columns,here,extra\nAlso fine,Another row,good\n"
    p = read_table(data, "csv", ColumnMapping(text="text", title="title", label="label"), "shifted.csv")
    assert [(r.title, r.label) for r in p.records] == [("Fine", "good"), ("Also fine", "good")]
    assert [str(i) for i in p.errors] == [
        "ERROR shifted.csv row 2: has 5 values but the header has 3 columns (line 3); its values cannot be matched "
        'to the columns, so the row is left out: quote a value that holds the delimiter ("a, b") or remove the extra '
        "values"]
    assert (p.n_rows_read, p.n_skipped, len(p.records)) == (3, 1, 2)


def test_parquet_table() -> None:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(ROWS), buf)
    p = read_table(buf.getvalue(), "parquet", MAP, "d.parquet")
    assert [(r.title, r.label) for r in p.records] == [("Mars", "planets"), ("Iron", "elements"), ("Café", None)]


def test_suggest_mapping_and_fallback_title() -> None:
    assert suggest_mapping(["Title", "Body", "Category"]) == ColumnMapping("Body", "Title", "Category")
    assert suggest_mapping(["id", "text"]) == ColumnMapping("text", None, None)
    assert suggest_mapping(["a", "b"]) is None
    assert fallback_title("# Heading\nmore") == "Heading"
    long = fallback_title("word " * 40)
    assert long.endswith("…") and len(long) <= 61
