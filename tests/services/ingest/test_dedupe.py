"""Tests for services.ingest.dedupe and the record limits in services.ingest.records."""

from __future__ import annotations

import hashlib
import unicodedata

from services.ingest.dedupe import content_hash, dedupe
from services.ingest.records import ImportIssue, ImportPreview, ImportRecord, check_records


def rec(title: str, text: str, source: str | None = None) -> ImportRecord:
    return ImportRecord(title, text, None, source or f"{title}.txt")


def test_content_hash_normalises_nfc_and_whitespace() -> None:
    composed = "café  au\n\tlait "
    decomposed = unicodedata.normalize("NFD", "café au lait")
    assert composed != decomposed
    assert content_hash(composed) == content_hash(decomposed)
    assert content_hash("café au lait") == hashlib.sha256("café au lait".encode()).hexdigest()
    assert content_hash("Café au lait") != content_hash("café au lait")


def test_dedupe_keeps_first_and_reports_later() -> None:
    records = [rec("a", "Same text."), rec("b", "Other."), rec("c", "Same   text.\n"), rec("d", "Known.")]
    unique, issues = dedupe(records, existing_hashes={content_hash("Known.")})
    assert [r.title for r in unique] == ["a", "b"]
    assert [(i.location, i.severity) for i in issues] == [("c.txt", "warning"), ("d.txt", "warning")]
    assert "same text as 'a' (a.txt)" in issues[0].message
    assert "already in the collection" in issues[1].message


def test_dedupe_names_a_dropped_copys_lost_label() -> None:
    def row(title: str, label: str | None, n: int) -> ImportRecord:
        return ImportRecord(title, "Same text.", label, f"f.csv row {n}")

    unique, issues = dedupe([row("a", "moon", 2), row("b", "mars", 3), row("c", "moon", 4), row("d", None, 5)])
    assert [r.title for r in unique] == ["a"]
    assert [i.message for i in issues] == [
        "'b' has the same text as 'a' (f.csv row 2); skipped with its label 'mars' (the copy kept has 'moon'): "
        "check which is right after the import",
        "'c' has the same text as 'a' (f.csv row 2); skipped",  # same label: nothing lost
        "'d' has the same text as 'a' (f.csv row 2); skipped"]  # no label: nothing lost
    _, issues = dedupe([row("a", None, 2), row("b", "mars", 3)])
    assert issues[0].message.endswith("skipped with its label 'mars' (the copy kept has no label): check which is "
                                      "right after the import")


def test_check_records_limits() -> None:
    records = [rec("ok", "  fine\r\n"), rec("empty", " \n "), rec("big", "é" * 600)]
    kept, issues = check_records(records, max_doc_bytes=1000)
    assert [(r.title, r.text) for r in kept] == [("ok", "fine")]
    assert issues[0] == ImportIssue("empty.txt", "the document is empty", "error")
    assert issues[1].location == "big.txt" and "1.2 KB" in issues[1].message and "chunking" in issues[1].message
    assert len(check_records(records, max_doc_bytes=None)[0]) == 2


def test_preview_helpers() -> None:
    a = ImportPreview([rec("x", "t")], [ImportIssue("row 2", "bad")], n_rows_read=2, n_skipped=1)
    b = ImportPreview([rec("y", "u")], [ImportIssue("f", "hmm", "warning")], n_rows_read=1)
    c = ImportPreview.combine([a, b])
    assert len(c.records) == 2 and c.n_rows_read == 3 and c.n_skipped == 1
    assert c.has_errors and len(c.errors) == 1 and len(c.warnings) == 1
    assert c.summary() == "2 documents ready, 1 skipped of 3 read, 1 error, 1 warning"
    assert c.label_counts() == {None: 2}
    assert str(c.errors[0]) == "ERROR row 2: bad"
