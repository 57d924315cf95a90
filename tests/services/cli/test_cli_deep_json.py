"""JSON nested too deeply for Python's parser (``[`` x 100000) in a table, one JSON Lines row, one field, a query file
or a benchmark file: ``python -m mrag_core`` names the file and the line (and the column) instead of ending in a
RecursionError traceback. A whole-file problem refuses the file; a bad JSONL line or query row is left out and the
others are imported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import db
from services.cli.main import main

DEEP = "[" * 100_000 + "]" * 100_000
GOOD_DOC = json.dumps({"title": "Rivers", "text": "Rivers carry water to the sea.", "label": "water"})
TOO_DEEP = "arrays or objects nested more than 500 levels deep"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 't.db'}"


def _titles(url: str, corpus: str) -> list[str]:
    store = db.open_store(url)
    try:
        c = db.get_corpus_by_name(store, corpus)
        return [d.title for d in db.list_documents(store, c.id, limit=None).items]
    finally:
        store.close()


def _error_line(err: str) -> str:
    assert "Traceback" not in err and "RecursionError" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_a_json_table_nested_too_deeply_is_refused_naming_the_file_and_line(url: str, tmp_path: Path,
                                                                           capsys) -> None:
    table = tmp_path / "deep.json"
    table.write_text('[\n  {"title": "A", "text": "Some text.", "extra": ' + DEEP + "}\n]\n")
    assert main(["import", "--corpus", "Deep", "--database", url, str(table)]) == 2
    # line 2 has 48 characters before its first "["; the list and the object are levels 1 and 2, so level 501 is
    # opened by the 499th "[", at column 48 + 499
    assert _error_line(capsys.readouterr().err) == ("error: cannot read deep.json: invalid JSON at line 2, "
                                                    f"column 547: {TOO_DEEP}")
    store = db.open_store(url)
    assert db.list_corpora(store) == []
    store.close()


@pytest.mark.parametrize("bad_line", [DEEP, '{"title": "B", "text": "x", "label": ' + DEEP + "}"],
                         ids=["whole line", "one field"])
def test_a_jsonl_line_nested_too_deeply_is_a_row_error_and_the_rest_imports(url: str, tmp_path: Path, capsys,
                                                                            bad_line: str) -> None:
    table = tmp_path / "docs.jsonl"
    table.write_text(f"{GOOD_DOC}\n{bad_line}\n")
    assert main(["import", "--corpus", "Deep", "--database", url, str(table)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    # level 501 opens at the 501st "[" of the bare list (column 501); in the field, after 37 characters and the
    # object's "{" (level 1), at the 500th "[" (column 37 + 500)
    column = 501 if bad_line == DEEP else 537
    assert f"  ERROR docs.jsonl line 2: invalid JSON at column {column}: {TOO_DEEP}" in captured.out.splitlines()
    assert _titles(url, "Deep") == ["Rivers"]


def _corpus_with_one_document(url: str) -> None:
    store = db.open_store(url)
    try:
        c = db.create_corpus(store, "Sea")
        db.add_documents(store, c.id, [{"title": "Rivers", "text": "Rivers carry water to the sea.", "label": "water"}])
    finally:
        store.close()


def test_a_query_file_nested_too_deeply_is_refused_naming_the_file_and_line(url: str, tmp_path: Path,
                                                                           capsys) -> None:
    _corpus_with_one_document(url)
    queries = tmp_path / "queries.json"
    queries.write_text(DEEP)
    assert main(["queries", "--corpus", "Sea", "--name", "Q", "--database", url, str(queries)]) == 2
    assert _error_line(capsys.readouterr().err) == (f"error: nothing was imported: {queries}: invalid JSON at line 1, "
                                                    f"column 501: {TOO_DEEP}")


@pytest.mark.parametrize("name,content,problem", [
    ("queries.jsonl", '{"text": "Where do rivers go?", "topics": ["Rivers"]}\n{"text": "x", "topics": ' + DEEP + "}\n",
     f"skipped line 2: not valid JSON: {TOO_DEEP}"),
    ("queries.csv", f"text,topics\nWhere do rivers go?,Rivers\nDeep,{DEEP}\n",
     f"skipped row 2: column 'topics': {TOO_DEEP} (character 501)"),
], ids=["jsonl", "csv cell"])
def test_a_query_row_nested_too_deeply_is_skipped_and_named(url: str, tmp_path: Path, capsys, name: str,
                                                             content: str, problem: str) -> None:
    _corpus_with_one_document(url)
    queries = tmp_path / name
    queries.write_text(content)
    assert main(["queries", "--corpus", "Sea", "--name", "Q", "--database", url, str(queries)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = captured.out.splitlines()
    assert lines[0] == "query set 'Q' (#1): 1 query imported, 0 flagged, 1 row skipped"
    assert f"  {problem}" in lines


def test_bench_articles_nested_too_deeply_name_the_file_and_line(tmp_path: Path, capsys) -> None:
    articles, queries = tmp_path / "articles.json", tmp_path / "queries.json"
    articles.write_text(DEEP)
    queries.write_text(json.dumps([{"topics": ["Rivers"], "text": "Where do rivers go?"}]))
    assert main(["bench", "--articles", str(articles), "--queries", str(queries), "--model", "no-model"]) == 2
    assert _error_line(capsys.readouterr().err) == f"error: {articles}: invalid JSON at line 1, column 501: {TOO_DEEP}"
