"""workflows.import_stream: an upload previewed and imported as a stream gives what the in-memory preview gives."""

from __future__ import annotations

import io
import zipfile
from collections import Counter
from pathlib import Path

import pytest

import db
from services.ingest import ColumnMapping, ImportRecord, content_hash
from services.workflows import corpus as cw
from services.workflows import import_stream as ist
from services.workflows.import_stream import StreamedImport, TableFile

MAP = ColumnMapping(text="text", title="title", label="label")
CSV = (
    "title,text,label\n"
    "Goal,The striker scored a late goal,sport\n"
    "Pasta,Boil the pasta in salted water,cooking\n"
    "Empty,,sport\n"
    "Again,The  striker scored a late goal,Sport\n"  # the same text (spacing), another label spelling
    "Shifted,too,many,values\n"
    ",Whisk eggs and flour for a batter,Cooking\n"
    "Known,A text the corpus holds already,sport\n"
    "Long," + "word " * 500 + ",history\n"
).encode()
JSONL = (b'{"title": "J1", "text": "A line of JSON", "label": "sport"}\nnot json\n'
         b'{"title": "J2", "text": "Boil the pasta in salted water"}\n')


def _streamed(tmp_path: Path, chunking: cw.ChunkOptions | None, existing: set[str], labels: list[str]
              ) -> StreamedImport:
    (tmp_path / "news.csv").write_bytes(CSV)
    return StreamedImport(tables=[TableFile("news.csv", tmp_path / "news.csv", "csv", MAP),
                                  TableFile("more.jsonl", JSONL, "jsonl", MAP)],
                          chunking=chunking, existing_hashes=existing, existing_labels=labels,
                          max_doc_bytes=1000)


@pytest.mark.parametrize("chunking", [None, cw.ChunkOptions(method="chars", size=600, overlap=0)],
                         ids=["whole", "chunked"])
def test_the_streamed_report_and_records_equal_the_in_memory_preview(tmp_path: Path, chunking) -> None:  # noqa: ANN001
    existing = {content_hash("A text the corpus holds already")}
    labels = ["SPORT"]
    want = cw.prepare_import(cw.read_upload("table", [("news.csv", CSV), ("more.jsonl", JSONL)], mapping=MAP),
                             chunking=chunking, existing_hashes=existing, existing_labels=labels, max_doc_bytes=1000)
    stream = _streamed(tmp_path, chunking, existing, labels)
    report = stream.report()
    assert report.records == want.records == list(stream.records())
    assert Counter(map(str, report.issues)) == Counter(map(str, want.issues))  # the same issues (in row order)
    assert (report.n_rows_read, report.n_skipped, report.n_duplicates, report.n_records) == (
        want.n_rows_read, want.n_skipped, want.n_duplicates, len(want.records))
    assert (report.n_errors, report.n_warnings) == (len(want.errors), len(want.warnings))
    assert report.summary() == want.summary() and report.label_counts() == want.label_counts()
    assert any(str(i).startswith("ERROR news.csv row 5: has 4 values but the header has 3 columns")
               for i in report.issues)
    if chunking is None:
        assert report.n_records + report.n_skipped == report.n_rows_read


def test_a_report_keeps_the_first_records_and_issues_and_counts_them_all(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ist, "ISSUES_KEPT", 5)
    monkeypatch.setattr(ist, "RECORDS_KEPT", 3)
    rows = "".join(f"T{i},{'text ' + str(i) if i % 2 else ''},x\n" for i in range(40))  # every other text empty
    (tmp_path / "t.csv").write_text("title,text,label\n" + rows, encoding="utf-8")
    report = StreamedImport(tables=[TableFile("t.csv", tmp_path / "t.csv", "csv", MAP)]).report()
    assert (report.n_rows_read, report.n_records, report.n_skipped, report.n_errors) == (40, 20, 20, 20)
    assert [r.title for r in report.records] == ["T1", "T3", "T5"]
    assert [i.where for i in report.issues] == ["t.csv row 1", "t.csv row 3", "t.csv row 5", "t.csv row 7",
                                                "t.csv row 9"]
    assert report.summary() == "20 documents ready, 20 skipped of 40 read, 20 errors, 0 warnings"
    assert report.label_counts() == {"x": 20}


def test_a_file_unreadable_half_way_is_left_out_whole(tmp_path: Path) -> None:
    """A quote never closed near the end of one table: that table is left out with its error (as read_table leaves
    it out), the other is previewed and imported, and the counts hold only the other's rows."""
    broken = tmp_path / "broken.csv"
    broken.write_text("title,text,label\nA,fine text,x\nB,\"never closed,x\n", encoding="utf-8")
    stream = StreamedImport(tables=[TableFile("broken.csv", broken, "csv", MAP),
                                    TableFile("more.jsonl", JSONL, "jsonl", MAP)])
    report = stream.report()
    assert report.refused == {"broken.csv": 'line 3: a quoted field is never closed (a " without its closing "): the '
                                            "rest of the file would be read as one value"}
    assert [r.title for r in report.records] == ["J1", "J2"] and report.n_rows_read == 3
    assert str(report.issues[0]).startswith("ERROR broken.csv: line 3: a quoted field is never closed")
    assert [r.title for r in stream.records()] == ["J1", "J2"]


def test_a_preview_of_another_kind_streams_through_the_same_options(store: db.Store) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("physics/a.txt", "Atoms are made of protons.")
        zf.writestr("Physics/b.txt", "Atoms are made of protons.")
        zf.writestr("history/c.md", "Rome was not built in a day.")
        zf.writestr("history/bad.bin", b"\x00\x01")
    read = cw.read_upload("zip", [("notes.zip", buf.getvalue())])
    want = cw.prepare_import(read)
    stream = StreamedImport(preview=read)
    report = stream.report()
    assert report.records == want.records and report.summary() == want.summary()
    result = cw.import_records(store, stream.records(), new_name="Notes")
    assert result.added == 2 and db.get_corpus(store, result.corpus_id).n_documents == 2


def test_seen_texts_words_duplicates_as_dedupe_does() -> None:
    seen = ist.SeenTexts([content_hash("old text")])
    a = ImportRecord("A", "new  text", "x", "f.csv row 1")
    assert seen.take(a) is None
    assert str(seen.take(ImportRecord("B", "new text", "y", "f.csv row 2"))) == (
        "WARNING f.csv row 2: 'B' has the same text as 'A' (f.csv row 1); skipped with its label 'y' (the copy kept "
        "has 'x'): check which is right after the import")
    assert "'C' is already in the collection" in str(seen.take(ImportRecord("C", "old text", None, "f.csv row 3")))
    seen.close()
