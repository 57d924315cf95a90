"""`mrag-studio import --corpus NAME`: a name the store would refuse or take for an existing corpus is
refused before any file is read, with the CLI's own wording."""

from __future__ import annotations

import json
from pathlib import Path

import db
from services.cli.main import main
from tests.support.mini_corpus import MINI_DOCS


def _run(url: str, *argv: str) -> int:
    return main([*argv, "--database", url])


def test_blank_or_padded_corpus_names_are_refused_before_reading(tmp_path: Path, capsys) -> None:
    """'--corpus ""' read and listed the file, then said 'Choose either an existing corpus or a name for a new
    corpus.' (the import page's words: there is nothing to choose on a command line); '--corpus " Mini "' beside
    a corpus 'Mini' read the file and failed in the store instead of pointing at --add."""
    url = f"sqlite:///{tmp_path / 't.db'}"
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(json.dumps(a) for a in MINI_DOCS[:2]))
    for blank in ("", "   "):
        assert _run(url, "import", "--corpus", blank, str(path)) == 2
        captured = capsys.readouterr()
        assert "error: --corpus needs the name of the new corpus" in captured.err
        assert "read " not in captured.out  # refused before the files were read
    assert _run(url, "import", "--corpus", "Mini", str(path)) == 0
    capsys.readouterr()
    assert _run(url, "import", "--corpus", " Mini ", str(path)) == 2
    captured = capsys.readouterr()
    assert "a corpus named 'Mini' exists; pass --add to add documents to it" in captured.err
    assert "read " not in captured.out
    store = db.open_store(url)
    try:
        assert [c.name for c in db.list_corpora(store)] == ["Mini"]
        assert db.get_corpus_by_name(store, "Mini").n_documents == 2
    finally:
        store.close()
