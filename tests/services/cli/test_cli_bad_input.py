"""Bad input to ``python -m mrag_core`` not covered elsewhere: each ends with one ``error:`` line, exit status 2,
no traceback, and leaves what is stored as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import db
from mrag_core.models.loader import ModelLoadError, load_model
from services.cli.main import main
from tests.support.mini_corpus import MINI_DOCS, mini_store


def _one_error(err: str) -> str:
    """The single ``error: ...`` line of ``err`` (asserting there is no traceback and no other line)."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize("option", ["--json", "--authors-json", "--plotter-json"])
def test_bench_output_that_is_a_folder_is_refused_before_the_run(tmp_path: Path, capsys, option: str) -> None:
    articles, queries = tmp_path / "a.json", tmp_path / "q.json"
    articles.write_text(json.dumps(MINI_DOCS))
    queries.write_text(json.dumps([{"topics": ["Moon", "Bread"], "text": "moon bread", "fusion": ["moon", "bread"]}]))
    folder = tmp_path / "out"
    folder.mkdir()
    assert main(["bench", "--articles", str(articles), "--queries", str(queries), option, str(folder),
                 "--model", str(tmp_path / "no-model")]) == 2  # refused before the (missing) model is looked at
    assert _one_error(capsys.readouterr().err) == f"error: cannot write {option} {folder}: it is a folder; give the " \
                                                  "file to write"
    assert list(folder.iterdir()) == []


def test_queries_from_a_folder_says_it_is_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    url, store, _, _ = mini_store(tmp_path, monkeypatch)
    store.close()
    folder = tmp_path / "queries"
    folder.mkdir()
    assert main(["queries", "--corpus", "Mini", "--name", "Q", "--database", url, str(folder)]) == 2
    assert _one_error(capsys.readouterr().err) == f"error: {folder} is a folder: give the query file (JSON or CSV)"


def test_a_write_the_database_refuses_is_one_line_and_keeps_what_is_stored(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys) -> None:
    url, store, _, _ = mini_store(tmp_path, monkeypatch)
    store.close()
    path = url.removeprefix("sqlite:///")
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"  # what SQLite says of a file the user may not write
    table = tmp_path / "more.csv"
    table.write_text("text,label\nA new document about rivers.,water\n")
    assert main(["import", "--corpus", "New", "--database", read_only, str(table)]) == 2
    captured = capsys.readouterr()
    assert _one_error(captured.err) == ("error: the database refused the change (attempt to write a readonly "
                                        "database); nothing of it was written. Check that the database file and its "
                                        "folder may be written, or give another --database")
    store = db.open_store(url)
    assert [c.name for c in db.list_corpora(store)] == ["Mini"]
    store.close()


def test_a_model_type_transformers_does_not_know_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no_such_architecture"}))
    with pytest.raises(ModelLoadError) as exc:
        load_model(str(tmp_path))
    message = str(exc.value)
    assert "\n" not in message and "pip install" not in message
    assert message.startswith(f"cannot read the model config in '{tmp_path}': The checkpoint you are trying to load "
                              "has model type `no_such_architecture` but Transformers does not recognize this "
                              "architecture.")


@pytest.mark.parametrize("url", ["postgresql://bob:s3cretpw/db",  # the "@host" forgotten: the password read as a port
                                 "postgresql://bob:s3cretpw@127.0.0.1:notaport/db"])
def test_an_unopenable_database_url_never_shows_its_password(url: str, capsys) -> None:
    assert main(["corpora", "--database", url]) == 2
    line = _one_error(capsys.readouterr().err)
    assert "s3cretpw" not in line and line.startswith("error: cannot open the database: ")


def test_url_secrets_are_the_password_not_a_port() -> None:
    from services.cli.common import hide_secrets, url_secrets

    assert url_secrets("postgresql://bob:pw@db.example:5432/mrag") == ["pw"]
    assert url_secrets("postgresql://bob:s3cretpw/db") == ["s3cretpw"]
    assert url_secrets("postgresql://db.example:5432/mrag") == []
    assert url_secrets("sqlite:////tmp/x.db") == []
    assert hide_secrets("port 5432 of bob:pw refused", "postgresql://bob:pw@h:5432/d") == "port 5432 of bob:*** refused"
