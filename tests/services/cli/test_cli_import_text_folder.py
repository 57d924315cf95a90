"""`mrag-studio import --corpus NAME FOLDER` with the default --kind auto: a folder of plain .txt / .md files
(no .json in it) is read as text files, as the PATH help promises ('one folder of the topic layout / text files');
it was taken for the topic layout and refused with 'no topic files found; expected <category>/<category>_<topic>.json
files'. A folder with the topic layout is still read as that layout."""

from __future__ import annotations

import json
from pathlib import Path

import db
from services.cli.importing import guess_kind
from services.cli.main import main


def _titles_texts(url: str, name: str) -> list[tuple[str, str, str | None]]:
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, name)
        return sorted((d.title, d.text, d.label) for d in db.list_documents(store, corpus.id, limit=None).items)
    finally:
        store.close()


def test_a_folder_of_text_files_is_imported_with_kind_auto(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "one.txt").write_text("First plain text document.")
    (folder / "sub" / "two.md").write_text("Markdown doc.")
    (folder / "u16.txt").write_bytes("UTF-16 text with BOM \u00fc".encode("utf-16"))
    (folder / "empty.txt").write_text("")
    assert main(["import", "--corpus", "Notes", str(folder), "--database", url]) == 0
    out = capsys.readouterr().out
    assert "read 4 files: 3 documents to import in 0 categories; 1 error (left out)" in out
    assert "ERROR empty.txt: the file is empty" in out
    assert _titles_texts(url, "Notes") == [("one", "First plain text document.", None),
                                           ("two", "Markdown doc.", None),
                                           ("u16", "UTF-16 text with BOM \u00fc", None)]


def test_guess_kind_tells_text_folders_from_the_topic_layout(tmp_path: Path) -> None:
    text = tmp_path / "text"
    text.mkdir()
    (text / "a.txt").write_text("a")
    topics = tmp_path / "legal"
    (topics / "contracts").mkdir(parents=True)
    (topics / "contracts" / "contracts_sale.json").write_text(json.dumps({"documents": []}))
    (topics / "README.md").write_text("the layout, described")  # a .md beside the .json: still the layout
    empty = tmp_path / "empty"
    empty.mkdir()
    assert guess_kind([text]) == "text"
    assert guess_kind([topics]) == "topics"
    assert guess_kind([empty]) == "topics"  # nothing to read: the layout's own message says what was expected
    assert guess_kind([text / "a.txt"]) == "text"
