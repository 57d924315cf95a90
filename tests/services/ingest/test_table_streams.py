"""Tables read as streams (issue 32 item 6): rows come one at a time, so memory does not grow with the file."""

from __future__ import annotations

import bz2
import gzip
import tracemalloc
from pathlib import Path

import pytest

from services.ingest import ColumnMapping, IngestError, iter_table, read_table, sniff_columns, text_source

MAP = ColumnMapping(text="text", title="title", label="label")


def _csv(path: Path, rows: int, tail: str = "") -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write("title,text,label\n")
        for i in range(rows):
            fh.write(f"Row {i},\"The text of row {i}, with a comma and some more words to make it longer\",l{i % 5}\n")
        fh.write(tail)
    return path


def _peak_bytes_reading(path: Path, fmt: str = "csv") -> tuple[int, int]:
    """(rows read, peak bytes allocated while reading every row of ``path``)."""
    tracemalloc.start()
    try:
        n = sum(1 for row in iter_table(path, fmt, MAP, path.name) if row.record is not None)
        return n, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_rows_come_before_the_whole_file_is_read(tmp_path: Path) -> None:
    """A quote never closed on the last line refuses the file (as read_table says), but only once the reader gets
    there: the rows before it were handed out one by one already."""
    path = _csv(tmp_path / "broken.csv", 1_000, tail='Last,"a quote never closed,l1\n')
    rows = iter_table(path, "csv", MAP, "broken.csv")
    first = next(rows)
    assert first.record is not None and first.record.title == "Row 0"
    taken = 1
    with pytest.raises(IngestError, match=r"broken\.csv: line 1002: a quoted field is never closed"):
        for _ in rows:
            taken += 1
    assert taken == 1_001  # every row, the last one too: the check at the end of the file refuses it
    preview = read_table(path.read_bytes(), "csv", MAP, "broken.csv")  # read whole: the file is left out
    assert preview.records == [] and [str(i) for i in preview.issues] == [
        'ERROR broken.csv: line 1002: a quoted field is never closed (a " without its closing "): the rest of the '
        "file would be read as one value"]


@pytest.mark.parametrize("pack", [bz2.compress, gzip.compress, lambda b: b"\xef\xbb\xbf" + b],
                         ids=["bz2", "gzip", "bom"])
def test_compressed_and_bom_tables_read_from_disk_as_from_bytes(tmp_path: Path, pack) -> None:  # noqa: ANN001
    raw = _csv(tmp_path / "t.csv", 50).read_bytes()
    packed = tmp_path / "t.csv.pack"
    packed.write_bytes(pack(raw))
    from_disk = [r.record for r in iter_table(packed, "csv", MAP, "t.csv")]
    from_bytes = read_table(pack(raw), "csv", MAP, "t.csv").records
    assert from_disk == from_bytes and len(from_bytes) == 50 and from_bytes[0].title == "Row 0"


def test_a_legacy_encoding_is_decoded_whole_with_its_warning(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes("title,text,label\nCafé,Un café crème,boisson\n".encode("cp1252"))
    rows = list(iter_table(path, "csv", MAP, "latin.csv"))
    assert [r.record.title for r in rows if r.record] == ["Café"]
    assert any("not valid UTF-8" in str(i) and i.source == "latin.csv" for r in rows for i in r.issues)


def test_one_text_source_serves_every_pass(tmp_path: Path) -> None:
    path = _csv(tmp_path / "t.csv", 10)
    src = text_source(path, "t.csv")
    assert sniff_columns(src, "csv", "t.csv") == ["title", "text", "label"]
    first = [r.record for r in iter_table(src, "csv", MAP, "t.csv")]
    again = [r.record for r in iter_table(src, "csv", MAP, "t.csv")]
    assert first == again and len(first) == 10


def test_jsonl_streams_with_its_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"title": "A", "text": "alpha"}\n\nnot json\n{"title": "B", "text": "beta", "label": "x"}\n[1]\n',
                    encoding="utf-8")
    rows = list(iter_table(path, "jsonl", MAP, "t.jsonl"))
    assert [r.record.title for r in rows if r.record] == ["A", "B"]
    assert [str(i) for r in rows for i in r.issues] == [
        "ERROR t.jsonl line 3: invalid JSON at column 1: Expecting value",
        "ERROR t.jsonl line 5: expected an object, found a list"]
    assert sum(r.counted for r in rows) == 4


def _json(path: Path, rows: int, wrapped: bool = False) -> Path:
    items = ",\n".join(f'{{"title": "Row {i}", "text": "The text of row {i}, with some more words to make it longer", '
                       f'"label": "l{i % 5}"}}' for i in range(rows))
    path.write_text(f'{{"meta": {{"n": {rows}}}, "documents": [\n{items}\n]}}' if wrapped else f"[\n{items}\n]",
                    encoding="utf-8")
    return path


@pytest.mark.parametrize(("fmt", "write"), [
    ("csv", _csv),
    ("json", _json),
    ("json", lambda path, rows: _json(path, rows, wrapped=True)),
], ids=["csv", "json-array", "json-documents-object"])
def test_reading_a_table_takes_memory_for_a_buffer_and_a_row_not_for_the_file(tmp_path: Path, fmt, write) -> None:  # noqa: ANN001
    """Peak memory while reading every row of a file four times as large is about the same, and far below the
    file's size. A CSV holds the encoding check's 1 MB blocks, a line buffer and one row; a JSON array (or an
    object's "documents" array) is checked and then read one item at a time through a buffer
    (``mrag_core.jsonlines.CHUNK``, 256K characters). Read whole (the code before), the text and every row were
    held at once: several times the file (5.4 times for JSON)."""
    small = write(tmp_path / f"small.{fmt}", 20_000)
    large = write(tmp_path / f"large.{fmt}", 80_000)
    n_small, peak_small = _peak_bytes_reading(small, fmt)
    n_large, peak_large = _peak_bytes_reading(large, fmt)
    assert (n_small, n_large) == (20_000, 80_000)
    size = large.stat().st_size
    assert size > 7_000_000
    assert peak_large < size / 3
    assert peak_large < 1.5 * peak_small + 1_000_000, (peak_small, peak_large)


def test_a_broken_json_table_is_refused_before_any_row(tmp_path: Path) -> None:
    """The whole document is checked before the first row is handed out: a missing comma near the end refuses the
    file at its line and column, and nothing of it was read as rows."""
    path = _json(tmp_path / "t.json", 3_000)
    text = path.read_text(encoding="utf-8")
    cut = text.rindex("},\n")
    path.write_text(text[:cut + 1] + "\n" + text[cut + 3:], encoding="utf-8")  # the last "," gone
    rows = iter_table(path, "json", MAP, "t.json")
    with pytest.raises(IngestError, match=r"^t\.json: invalid JSON at line 3001, column 1: Expecting ',' delimiter$"):
        next(rows)
    first = [r.record.title for r in iter_table(_json(tmp_path / "ok.json", 3), "json", MAP, "ok.json")]
    assert first == ["Row 0", "Row 1", "Row 2"]
