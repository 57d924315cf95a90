"""Tests for services.export: every format round-trips through services.ingest."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from mrag_core.benchmark import Article, load_articles
from services.export import (
    EXPORT_FORMATS,
    ExportError,
    export,
    export_benchmark_json,
    export_csv,
    export_jsonl,
    export_parquet,
    file_stem,
    write_benchmark_json,
    write_csv,
    write_export,
    write_jsonl,
    write_parquet,
)
from services.ingest import ColumnMapping, preview_wikipedia_articles, read_table, sniff_columns

DOCS: list[dict[str, Any]] = [
    {"title": "Mars", "text": "The fourth planet.\nRed, dusty; cold.", "label": "planets", "label_source": "human"},
    {
        "title": "Crème brûlée",
        "text": 'A dessert with "burnt" cream, 5 €.',
        "label": "food",
        "label_source": "suggestion",
    },
    {"title": "Loose note", "text": "No category yet,\n\nsecond paragraph.", "label": None, "label_source": None},
]
MAPPING = ColumnMapping(text="text", title="title", label="label")


def triples(records: Any) -> list[tuple[str, str, str | None]]:
    return [(r.title, r.text, r.label) for r in records]


EXPECTED = [(d["title"], d["text"], d["label"]) for d in DOCS]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_round_trip_through_ingest(fmt: str) -> None:
    data = export(DOCS, fmt)
    assert sniff_columns(data, fmt) == ["title", "text", "label", "label_source"]
    preview = read_table(data, fmt, MAPPING, f"corpus.{fmt}")
    assert preview.issues == []
    assert triples(preview.records) == EXPECTED


def test_jsonl_content_and_label_source() -> None:
    lines = export_jsonl(DOCS).decode("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == DOCS
    assert "Crème" in lines[1]  # not \u-escaped


def test_parquet_keeps_nulls_and_label_source() -> None:
    table = pq.read_table(io.BytesIO(export_parquet(DOCS)))
    assert table.to_pylist() == DOCS
    assert [str(t) for t in table.schema.types] == ["string"] * 4


def test_csv_empty_cells_for_none() -> None:
    text = export_csv(DOCS).decode("utf-8")
    assert text.splitlines()[0] == "title,text,label,label_source"
    assert text.rstrip().endswith('"No category yet,\n\nsecond paragraph.",,')


def test_benchmark_json_requires_labels_and_round_trips(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"1 document has no label \(first: 'Loose note'\)"):
        export_benchmark_json(DOCS)
    data = export_benchmark_json(DOCS, unlabeled="skip")
    assert json.loads(data) == [{k: d[k] for k in ("title", "text", "label")} for d in DOCS[:2]]
    path = write_benchmark_json(DOCS, tmp_path / "articles.json", unlabeled="skip")
    assert load_articles(path) == [Article(d["title"], d["text"], d["label"]) for d in DOCS[:2]]
    preview = preview_wikipedia_articles(data, "articles.json")
    assert triples(preview.records) == EXPECTED[:2]
    with pytest.raises(ExportError, match="no labelled documents"):
        export_benchmark_json(DOCS[2:], unlabeled="skip")


def test_write_variants(tmp_path: Path) -> None:
    assert write_jsonl(DOCS, tmp_path / "a.jsonl").read_bytes() == export_jsonl(DOCS)
    assert write_csv(DOCS, tmp_path / "a.csv").read_bytes() == export_csv(DOCS)
    p = write_parquet(DOCS, tmp_path / "a.parquet")
    assert pq.read_table(p).to_pylist() == DOCS
    q = write_export(DOCS, "jsonl", tmp_path / "b.jsonl")
    assert triples(read_table(q.read_bytes(), "jsonl", MAPPING, "b").records) == EXPECTED
    with pytest.raises(ExportError, match="folder .*missing does not exist"):
        write_csv(DOCS, tmp_path / "missing" / "a.csv")


@pytest.mark.parametrize(
    "doc,message",
    [
        ({"title": "t", "text": "  "}, r"document 1 \('t'\) has no text"),
        ({"title": "t"}, "has no text"),
        ({"title": 3, "text": "x"}, "title must be a string"),
        ({"title": "t", "text": "x", "label": 5}, "label must be a string or None"),
        ({"title": "t", "text": "x", "label": "a", "label_source": "robot"}, "label_source must be"),
    ],
)
def test_invalid_documents(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ExportError, match=message):
        export_jsonl([doc])


def test_unknown_format_and_format_table() -> None:
    with pytest.raises(ExportError, match="unknown export format 'xml'"):
        export(DOCS, "xml")
    assert set(EXPORT_FORMATS) == {"jsonl", "csv", "parquet", "benchmark"}
    assert EXPORT_FORMATS["csv"].mime == "text/csv"


def test_blank_label_exported_as_none() -> None:
    out = json.loads(export_jsonl([{"title": "t", "text": "x", "label": "  "}]))
    assert out["label"] is None and out["label_source"] is None


@pytest.mark.parametrize("name, stem", [
    ("Wikipedia v1", "Wikipedia_v1"),
    ("runs/2024: v1", "runs_2024_v1"),
    ("../../etc/passwd", ".._.._etc_passwd"),  # no folder part survives: every '/' becomes '_'
    ("Café — théâtre", "Caf_th_tre"),
    ("///", "corpus"),
    ("a.b-c_d", "a.b-c_d"),
])
def test_file_stem_keeps_ascii_letters_digits_dot_dash_underscore(name: str, stem: str) -> None:
    assert file_stem(name, "corpus") == stem


HOSTILE: list[dict[str, Any]] = [
    {"title": '=HYPERLINK("http://evil.example","click")', "text": "-2+3+cmd|' /C calc'!A0", "label": "=evil",
     "label_source": "human"},
    {"title": "-5", "text": "+1 more point", "label": "@team", "label_source": "suggestion"},
    {"title": "'=already quoted", "text": "- a bullet\n- another", "label": "-5 degrees", "label_source": "human"},
    {"title": "@SUM(A1)", "text": "plain text", "label": None, "label_source": None},
]


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised() -> None:
    rows = list(csv.reader(io.StringIO(export_csv(HOSTILE).decode("utf-8"))))
    assert rows[1][:3] == ['\'=HYPERLINK("http://evil.example","click")', "'-2+3+cmd|' /C calc'!A0", "'=evil"]
    assert rows[2][:3] == ["-5", "'+1 more point", "'@team"]  # the plain number -5 runs nothing: left as it is
    assert rows[3][:3] == ["''=already quoted", "'- a bullet\n- another", "'-5 degrees"]
    assert rows[4][:3] == ["'@SUM(A1)", "plain text", ""]
    starts = [cell[:1] for row in rows[1:] for cell in row[:3] if cell != "-5"]
    assert not any(c and c in "=+-@\t\r" for c in starts)


def test_a_neutralised_csv_reads_back_as_the_jsonl_export_does() -> None:
    from_csv = read_table(export_csv(HOSTILE), "csv", MAPPING, "hostile.csv")
    from_jsonl = read_table(export_jsonl(HOSTILE), "jsonl", MAPPING, "hostile.jsonl")
    assert from_csv.issues == [] and from_jsonl.issues == []
    assert triples(from_csv.records) == triples(from_jsonl.records) == [
        (d["title"], d["text"], d["label"]) for d in HOSTILE]


def test_only_a_new_path_or_a_regular_file_is_written(tmp_path: Path) -> None:
    import os

    target = tmp_path / "real.csv"
    target.write_text("kept")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    for path, what in ((link, "a symbolic link"), (fifo, "a FIFO"), (Path("/dev/null"), "a character device"),
                       (tmp_path, "a folder")):
        with pytest.raises(ExportError, match=f"it is {what}, not a regular file"):
            write_csv(DOCS, path)
    assert target.read_text() == "kept" and link.is_symlink() and fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "pipe.csv", "real.csv"]  # no temporary file
    assert write_csv(DOCS, target).read_bytes() == export_csv(DOCS)
