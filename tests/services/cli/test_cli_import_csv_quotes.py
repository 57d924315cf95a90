"""`mrag-studio import` of a CSV whose quoted field is never closed: refused with the line where the field
starts, nothing written (it imported the file's rows merged into one, or reported only "row 1: empty text");
a valid CSV with quoted multi-line fields and escaped quotes is imported as written."""

from __future__ import annotations

from pathlib import Path

import pytest

import db
from services.cli.main import main

UNCLOSED = 'line 3: a quoted field is never closed (a " without its closing "): the rest of the file would be read ' \
           "as one value"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 't.db'}"


def _corpora(url: str) -> list[str]:
    store = db.open_store(url)
    try:
        return [c.name for c in db.list_corpora(store)]
    finally:
        store.close()


@pytest.mark.parametrize("dry_run", [False, True])
def test_unclosed_quote_is_refused_with_its_line_and_nothing_is_written(url: str, tmp_path: Path, capsys,
                                                                         dry_run: bool) -> None:
    table = tmp_path / "notes.csv"
    table.write_text('title,text\nA,First note.\n"B,Second note.\nC,Third note.\n')
    assert main(["import", "--corpus", "Notes", *(["--dry-run"] if dry_run else []), str(table),
                 "--database", url]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: cannot read notes.csv: {UNCLOSED}\n"
    assert captured.out == ""
    assert _corpora(url) == []


@pytest.mark.parametrize("bad_first", [False, True])
def test_a_file_with_an_unclosed_quote_among_others_is_left_out_whole_and_listed(url: str, tmp_path: Path,
                                                                                  capsys, bad_first: bool) -> None:
    """First or not, an unreadable table is left out and the others are imported (as the Corpus Import page does)."""
    good = tmp_path / "good.csv"
    good.write_text("title,text\nA,First note.\n")
    bad = tmp_path / "bad.csv"
    bad.write_text('title,text\nB,Second note.\nC,"Third note.\nD,Fourth note.\n')
    paths = [str(bad), str(good)] if bad_first else [str(good), str(bad)]
    assert main(["import", "--corpus", "Notes", *paths, "--database", url]) == 0
    out = capsys.readouterr().out
    assert "read 1 row: 1 document to import in 0 categories; 1 error (left out)" in out
    assert f"  ERROR bad.csv: the file cannot be read, so it is left out: {UNCLOSED}\n" in out
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, "Notes")
        assert [(d.title, d.text) for d in db.list_documents(store, corpus.id, limit=None).items] == \
            [("A", "First note.")]
    finally:
        store.close()


def test_quoted_multi_line_fields_and_escaped_quotes_are_imported_as_written(url: str, tmp_path: Path,
                                                                             capsys) -> None:
    table = tmp_path / "poems.csv"
    table.write_bytes(b'title,text\n"Say ""hi""","He said ""hello"", then left."\n'
                      b'Poem,"First line,\nsecond line\n\nthird line"\n')
    assert main(["import", "--corpus", "Poems", str(table), "--database", url]) == 0
    assert "imported 2 documents into new corpus 'Poems'" in capsys.readouterr().out
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, "Poems")
        assert [(d.title, d.text) for d in db.list_documents(store, corpus.id, limit=None).items] == [
            ('Say "hi"', 'He said "hello", then left.'),
            ("Poem", "First line,\nsecond line\n\nthird line"),
        ]
    finally:
        store.close()
