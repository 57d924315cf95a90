"""`mrag-studio import` / `queries`: corpora and query sets created headless, against a real SQLite file."""

from __future__ import annotations

import bz2
import io
import json
import zipfile
from pathlib import Path

import pytest

import db
from services.cli.importing import guess_kind
from services.cli.main import main
from tests.support.mini_corpus import MINI_DOCS


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 't.db'}"


def _run(url: str, *argv: str) -> int:
    return main([*argv, "--database", url])


def _docs(url: str, name: str) -> list[tuple[str, str, str | None]]:
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, name)
        return [(d.title, d.text, d.label) for d in db.list_documents(store, corpus.id, limit=None).items]
    finally:
        store.close()


def test_benchmark_articles_and_queries_then_index_ready(url: str, tmp_path: Path, capsys) -> None:
    articles = tmp_path / "articles.json.bz2"
    articles.write_bytes(bz2.compress(json.dumps(MINI_DOCS).encode()))
    assert _run(url, "import", "--corpus", "Mini", str(articles)) == 0
    out = capsys.readouterr().out
    assert "4 documents to import in 2 categories; 0 errors" in out
    assert "imported 4 documents into new corpus 'Mini'" in out
    assert _docs(url, "Mini") == [(a["title"], a["text"], a["label"]) for a in MINI_DOCS]

    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps([
        {"topics": ["Moon", "Bread"], "text": "A moon-shaped loaf of bread.", "fusion": ["moon", "bread"]},
        {"topics": ["Soup", "Venus"], "text": "Soup on Venus.", "fusion": []},
        {"text": "no topics at all"},
    ]))
    assert _run(url, "queries", "--corpus", "Mini", "--name", "Q", str(queries)) == 0
    out = capsys.readouterr().out
    assert out.startswith("query set 'Q' (#1): 2 queries imported, 1 flagged, 1 row skipped")
    assert "query 2: no document is titled 'Venus' (flagged)" in out
    store = db.open_store(url)
    rows = db.list_queries(store, 1)
    corpus = db.get_corpus_by_name(store, "Mini")
    titles = {d.id: d.title for d in db.list_documents(store, corpus.id, limit=None).items}
    store.close()
    assert [[titles[i] for i in q.ground_truth] for q in rows] == [["Moon", "Bread"], ["Soup"]]
    assert [q.status for q in rows] == ["ok", "flagged"] and rows[0].fusion == ["moon", "bread"]


def test_queries_naming_a_title_of_several_documents_are_flagged_not_guessed(url: str, tmp_path: Path,
                                                                            capsys) -> None:
    articles = tmp_path / "articles.json"
    articles.write_text(json.dumps([{"title": "Doc 1", "text": "One.", "label": "a"},
                                    {"title": "Doc 1", "text": "Two.", "label": "a"},
                                    {"title": "Doc 1", "text": "Three.", "label": "b"}]))
    assert _run(url, "import", "--corpus", "Twins", str(articles)) == 0
    capsys.readouterr()
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps([{"topics": ["Doc 1"], "text": "Which one?"},
                                   {"topics": ["Doc 1"], "categories": ["b"], "text": "The one in b."}]))
    assert _run(url, "queries", "--corpus", "Twins", "--name", "Q", str(queries)) == 0
    out = capsys.readouterr().out
    assert out.startswith("query set 'Q' (#1): 2 queries imported, 1 flagged, 0 rows skipped")
    assert "query 1: 3 documents are titled 'Doc 1' and the file does not say which one; none was taken" in out
    assert "no document is titled" not in out
    store = db.open_store(url)
    rows = db.list_queries(store, 1)
    store.close()
    assert [(len(q.ground_truth), q.status) for q in rows] == [(0, "flagged"), (1, "ok")]


def test_table_with_named_columns_problems_listed_and_dry_run(url: str, tmp_path: Path, capsys) -> None:
    table = tmp_path / "notes.csv"
    table.write_text("h,note,t\nA,First note about bees.,bees\nB,,bees\nC,Second note about ships.,ships\n")
    assert _run(url, "import", "--corpus", "Notes", "--dry-run", str(table)) == 2  # no column name says text
    assert "cannot tell which column of notes.csv holds the text (columns: h, note, t)" in \
        capsys.readouterr().err
    assert _run(url, "import", "--corpus", "Notes", "--text-column", "bodyy", str(table)) == 2
    assert "notes.csv has no column 'bodyy' (--text-column); its columns: h, note, t" in \
        capsys.readouterr().err
    args = ["import", "--corpus", "Notes", "--text-column", "note", "--title-column", "h", "--label-column", "t",
            str(table)]
    assert _run(url, *args, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "2 documents to import in 2 categories; 1 error (left out)" in out
    assert "ERROR notes.csv row 2: empty text (column 'note')" in out and "dry run: nothing was written" in out
    store = db.open_store(url)
    assert db.list_corpora(store) == []
    store.close()
    assert _run(url, *args) == 0
    assert _docs(url, "Notes") == [("A", "First note about bees.", "bees"), ("C", "Second note about ships.", "ships")]


def test_adding_needs_add_skips_duplicates_and_writes_nothing_when_nothing_is_left(url, tmp_path, capsys) -> None:
    first = tmp_path / "a.jsonl"
    first.write_text("\n".join(json.dumps(a) for a in MINI_DOCS[:2]))
    both = tmp_path / "b.jsonl"
    both.write_text("\n".join(json.dumps(a) for a in MINI_DOCS[1:3]))
    assert _run(url, "import", "--corpus", "Mini", str(first)) == 0
    assert _run(url, "import", "--corpus", "Mini", str(both)) == 2
    assert "a corpus named 'Mini' exists; pass --add to add documents to it" in capsys.readouterr().err
    assert _run(url, "import", "--corpus", "Mars", "--add", str(both)) == 2
    assert "unknown corpus 'Mars' (corpora: 'Mini')" in capsys.readouterr().err
    assert _run(url, "import", "--corpus", "Mini", "--add", str(both)) == 0
    out = capsys.readouterr().out
    assert "'Mars' is already in the collection (same text); skipped" in out
    assert "1 document to import in 1 category; 1 duplicate left out, 0 errors" in out
    assert "imported 1 document into corpus 'Mini' (1 duplicate skipped);" in out
    assert [t for t, _, _ in _docs(url, "Mini")] == ["Moon", "Mars", "Bread"]
    assert _run(url, "import", "--corpus", "Mini", "--add", str(first)) == 0  # nothing new: not an error
    assert "nothing to import: every document is already in corpus 'Mini'" in capsys.readouterr().out
    assert len(_docs(url, "Mini")) == 3


def test_text_files_zip_and_chunking(url: str, tmp_path: Path, capsys) -> None:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "one.txt").write_text("Alpha paragraph one.\n\nAlpha paragraph two.")
    (folder / "sub" / "two.md").write_text("Beta text.")
    (folder / "skip.bin").write_bytes(b"\x00\x01")
    assert _run(url, "import", "--corpus", "T", "--kind", "text", "--label", "misc", str(folder)) == 0
    assert sorted(_docs(url, "T")) == [("one", "Alpha paragraph one.\n\nAlpha paragraph two.", "misc"),
                                       ("two", "Beta text.", "misc")]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bees/hive.txt", "Bees live in a hive.")
        z.writestr("ships/hull.txt", "x" * 30)
    archive = tmp_path / "docs.zip"
    archive.write_bytes(buf.getvalue())
    assert _run(url, "import", "--corpus", "Z", "--chunk", "chars", "--chunk-size", "20", "--overlap", "0",
                str(archive)) == 0
    assert _docs(url, "Z") == [("hive", "Bees live in a hive.", "bees"), ("hull (part 1/2)", "x" * 20, "ships"),
                               ("hull (part 2/2)", "x" * 10, "ships")]
    assert _run(url, "import", "--corpus", "Z2", "--chunk", "chars", "--chunk-size", "20", "--overlap", "20",
                str(archive)) == 2
    assert "overlap" in capsys.readouterr().err


def test_bad_paths_and_files(url: str, tmp_path: Path, capsys) -> None:
    assert _run(url, "import", "--corpus", "X", str(tmp_path / "missing.json")) == 2
    assert "no such file or folder" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{not json")
    assert _run(url, "import", "--corpus", "X", str(bad)) == 2
    assert capsys.readouterr().err.startswith("error: cannot read bad.json:")
    odd = tmp_path / "data.xyz"
    odd.write_text("hello")
    assert _run(url, "import", "--corpus", "X", str(odd)) == 2
    assert "cannot tell the table format of data.xyz" in capsys.readouterr().err
    assert _run(url, "queries", "--corpus", "X", "--name", "Q", str(bad)) == 2
    assert "unknown corpus 'X'" in capsys.readouterr().err
    store = db.open_store(url)
    assert db.list_corpora(store) == []
    store.close()


def test_guess_kind(tmp_path: Path) -> None:
    (tmp_path / "layout").mkdir()
    assert guess_kind([tmp_path / "layout"]) == "topics"
    assert guess_kind([tmp_path / "a.zip"]) == "zip"
    assert guess_kind([tmp_path / "a.txt", tmp_path / "b.MD"]) == "text"
    assert guess_kind([tmp_path / "a.txt", tmp_path / "b.csv"]) == "table"
    assert guess_kind([tmp_path / "a.json.bz2"]) == "table"


def test_topic_layout_folder_and_topic_level_queries(url: str, tmp_path: Path, capsys) -> None:
    root = tmp_path / "legal"
    for category, topic, docs in (("contract", "breach", ["Breach one.", "Breach two."]),
                                  ("tort", "negligence", ["Duty of care."])):
        (root / category).mkdir(parents=True)
        (root / category / f"{category}_{topic}.json").write_text(json.dumps(docs))
    assert _run(url, "import", "--corpus", "Legal", str(root)) == 0
    assert "3 documents to import in 2 categories" in capsys.readouterr().out
    assert [label for _, _, label in _docs(url, "Legal")] == ["contract", "contract", "tort"]
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps([{"text": "A broken promise and a careless driver",
                                    "related": ["breach", "negligence"]}]))
    assert _run(url, "queries", "--corpus", "Legal", "--name", "Q", str(queries)) == 0
    assert "1 query imported, 0 flagged" in capsys.readouterr().out
    store = db.open_store(url)
    (q,) = db.list_queries(store, 1)
    store.close()
    assert len(q.ground_truth) == 3  # both documents of the breach topic and the one of negligence


@pytest.mark.parametrize("command", [["import", "--corpus", "X", "a.json"], ["queries", "--corpus", "X", "--name", "Q",
                                                                             "q.json"],
                                     ["index", "--corpus", "X"], ["eval", "--corpus", "X", "--query-set", "Q"]])
def test_a_database_that_cannot_be_opened_is_one_line(tmp_path: Path, capsys, command: list[str]) -> None:
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("this is not SQLite")
    assert main([*command, "--database", f"sqlite:///{not_a_db}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot open the database: ") and len(err.strip().splitlines()) == 1
    assert not_a_db.read_text() == "this is not SQLite"


def test_a_table_with_only_its_header_says_the_files_hold_no_document(url: str, tmp_path: Path, capsys) -> None:
    """No problem is listed for a header-only table, so the refusal does not point at 'the problems above'."""
    table = tmp_path / "empty.csv"
    table.write_text("title,text,label\n")
    assert _run(url, "import", "--corpus", "Empty", str(table)) == 2
    captured = capsys.readouterr()
    assert "ERROR" not in captured.out
    assert captured.err.strip().splitlines()[-1] == ("error: nothing to import: the files hold no document; "
                                                     "nothing was written")
    store = db.open_store(url)
    try:
        assert db.list_corpora(store) == []
    finally:
        store.close()


def test_queries_from_a_windows_1252_csv_say_how_the_file_was_read(url: str, tmp_path: Path, capsys) -> None:
    """A spreadsheet's CSV in Windows-1252 imports (it was refused as 'not UTF-8 text'), the guess printed."""
    store = db.open_store(url)
    corpus = db.create_corpus(store, "Accents")
    db.add_documents(store, corpus.id, [{"title": "Zürich", "text": "A Swiss city.", "label": "places"},
                                        {"title": "Café", "text": "A place for coffee.", "label": "food"}])
    store.close()
    queries = tmp_path / "q.csv"
    queries.write_bytes("text,topics\nCoffee in Zürich.,Zürich|Café\n".encode("cp1252"))
    assert _run(url, "queries", "--corpus", "Accents", "--name", "Q", str(queries)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "query set 'Q' (#1): 1 query imported, 0 flagged, 0 rows skipped"
    assert out[1] == ("  q.csv: not valid UTF-8 (first bad byte at offset 23); read as Windows-1252 (cp1252). "
                      "Check accented characters, or save the file as UTF-8")
