"""Rows the database cannot store, imported with ``mrag-studio import`` / ``queries`` on every backend.

* A NUL character in a title or label: SQLite stored it, PostgreSQL refused the whole import with a traceback that
  printed the SQL parameters (the file's data). It is removed, with a warning naming the row.
* A label over 200 characters, or a lone surrogate (``"\\ud800"`` in JSON) in a title, label or text: the whole
  file was refused ("The category name is longer than 200 characters.", "'utf-8' codec can't encode character
  '\\ud800'...") without naming the row. The row is an error naming it; the other rows import.
* A query with a NUL or a lone surrogate: a traceback printing the parameters on PostgreSQL. The row is skipped,
  named.
* A statement the database still refuses ends as one ``error:`` line that shows neither the SQL nor its parameters.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import db
from services.cli.common import store_command
from services.cli.main import main
from tests.support.servers import BACKENDS

LONG = "x" * 201


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 't.db'}"
        return
    server = request.getfixturevalue(f"{request.param}_server")
    made = server.create_database()
    yield made
    server.drop_database(made)


def _stored(url: str, corpus: str) -> list[tuple[str, str, str | None]]:
    store = db.open_store(url)
    try:
        c = db.get_corpus_by_name(store, corpus)
        return [(d.title, d.text, d.label) for d in db.list_documents(store, c.id, limit=None).items]
    finally:
        store.close()


def test_bad_titles_and_labels_are_row_issues_and_the_other_rows_import(url: str, tmp_path: Path, capsys) -> None:
    rows = [
        {"title": "Rivers", "text": "Rivers carry water to the sea.", "label": "water"},
        {"title": "Nul\u0000title", "text": "Lakes hold still water.", "label": "water"},
        {"title": "Hills", "text": "Hills rise above the plain.", "label": "la\u0000nd\u0000"},
        {"title": "Long", "text": "A label far too long for a category.", "label": LONG},
        {"title": "Bad label", "text": "A damaged label.", "label": "sea\ud800"},
        {"title": "Bad\udc80 title", "text": "A damaged title.", "label": "water"},
        {"title": "Bad text", "text": "A damaged \ud800text.", "label": "water"},
    ]
    table = tmp_path / "docs.json"
    table.write_text(json.dumps(rows))  # json.dumps escapes the NULs and lone surrogates as \u0000, \ud800
    assert main(["import", "--corpus", "Geo", "--database", url, str(table)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "parameters" not in captured.out + captured.err
    assert captured.out.splitlines() == [
        "read 7 rows: 3 documents to import in 2 categories; 4 errors (left out), 2 warnings",
        "  WARNING docs.json row 2: 1 NUL character (\\x00) removed from the title: a database cannot store them",
        "  WARNING docs.json row 3: 2 NUL characters (\\x00) removed from the label: a database cannot store them",
        "  ERROR docs.json row 4: the label is 201 characters long, over the 200 a category name may have; "
        "shorten it",
        "  ERROR docs.json row 5: the label holds a lone surrogate (U+D800, character 4), which is not a character: "
        "the file is damaged there; fix or remove it",
        "  ERROR docs.json row 6: the title holds a lone surrogate (U+DC80, character 4), which is not a character: "
        "the file is damaged there; fix or remove it",
        "  ERROR docs.json row 7: the text holds a lone surrogate (U+D800, character 11), which is not a character: "
        "the file is damaged there; fix or remove it",
        "imported 3 documents into new corpus 'Geo'; next: mrag-studio index --corpus 'Geo'",
    ]
    assert _stored(url, "Geo") == [("Rivers", "Rivers carry water to the sea.", "water"),
                                   ("Nultitle", "Lakes hold still water.", "water"),
                                   ("Hills", "Hills rise above the plain.", "land")]


def test_queries_the_database_cannot_store_are_skipped_and_named(url: str, tmp_path: Path, capsys) -> None:
    store = db.open_store(url)
    corpus = db.create_corpus(store, "Geo")
    db.add_documents(store, corpus.id, [{"title": "Rivers", "text": "Rivers carry water to the sea."}])
    store.close()
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps([
        {"text": "Where do rivers go?", "topics": ["Rivers"]},
        {"text": "A river\u0000 story", "topics": ["Rivers"]},
        {"text": "Rivers again", "topics": ["Riv\u0000ers"]},
        {"text": "Rivers once more", "topics": ["Rivers"], "fusion": ["sea \ud800"]},
    ]))
    assert main(["queries", "--corpus", "Geo", "--name", "Q", "--database", url, str(queries)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.out.splitlines() == [
        "query set 'Q' (#1): 1 query imported, 0 flagged, 3 rows skipped",
        "  skipped item 2: the text 'A river\\x00 story' holds a NUL character (\\x00), which a database cannot store",
        "  skipped item 3: the topic 'Riv\\x00ers' holds a NUL character (\\x00), which a database cannot store",
        "  skipped item 4: the fusion query 'sea \\ud800' holds a lone surrogate (U+D800), which is not a character: "
        "the file is damaged there",
    ]


def test_a_value_the_database_refuses_is_one_line_without_sql_or_parameters(postgresql_server, capsys) -> None:
    """What reaches PostgreSQL with a NUL despite the checks (here a corpus name straight through the store) ends as
    one line naming the driver's reason: the SQL and the value stay out of it; the exception's own text (a page's
    exception, a traceback) shows the SQL but not the value."""
    url = postgresql_server.create_database()
    try:
        @store_command
        def write_a_nul(args: argparse.Namespace, store: db.Store) -> int:
            db.create_corpus(store, "secret\u0000name")
            return 0

        assert write_a_nul(argparse.Namespace(database=url)) == 2
        err = capsys.readouterr().err
        assert err.splitlines() == ["error: the database refused the change (PostgreSQL text fields cannot contain NUL "
                                    "(0x00) bytes); nothing of it was written. A value of the input cannot be stored "
                                    "in this database: fix it and run the command again"]
        store = db.open_store(url)
        with pytest.raises(Exception) as exc:
            db.create_corpus(store, "secret\u0000name")
        store.close()
        assert "[SQL parameters hidden" in str(exc.value) and "secret" not in str(exc.value)
    finally:
        postgresql_server.drop_database(url)
