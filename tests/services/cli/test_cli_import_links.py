"""`mrag-studio import FOLDER`: symbolic links inside the folder are skipped, each with a warning, for text
files and for the topic layout alike (a link to the system's password file was imported as a document)."""

from __future__ import annotations

import json
from pathlib import Path

import db
from services.cli.main import main


def _docs(url: str, name: str) -> list[tuple[str, str]]:
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, name)
        return sorted((d.title, d.text) for d in db.list_documents(store, corpus.id, limit=None).items)
    finally:
        store.close()


def test_a_link_in_a_text_folder_is_skipped_with_a_warning(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    outside = tmp_path / "private" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("root:x:0:0:the password file's kind of content")
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "one.txt").write_text("First plain text document.")
    (folder / "passwd.txt").symlink_to("/etc/passwd")
    (folder / "sub" / "secret.md").symlink_to(outside)
    (folder / "linked_dir").symlink_to(outside.parent, target_is_directory=True)
    assert main(["import", "--corpus", "Notes", str(folder), "--database", url]) == 0
    out = capsys.readouterr().out
    assert "read 1 file: 1 document to import in 0 categories; 0 errors (left out), 2 warnings" in out
    assert "WARNING passwd.txt: symbolic link skipped" in out and "WARNING sub/secret.md: symbolic link skipped" in out
    assert _docs(url, "Notes") == [("one", "First plain text document.")]


def test_a_folder_of_only_links_imports_nothing(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    folder = tmp_path / "links"
    folder.mkdir()
    (folder / "passwd.txt").symlink_to("/etc/passwd")
    assert main(["import", "--corpus", "Links", str(folder), "--kind", "text", "--database", url]) == 2
    assert capsys.readouterr().err.strip() == f"error: {folder} holds no .txt or .md file that is not a symbolic link"


def test_a_link_in_the_topic_layout_is_skipped_with_a_warning(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    elsewhere = tmp_path / "elsewhere" / "tort_negligence.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(json.dumps([{"title": "Outside", "text": "A file outside the layout."}]))
    legal = tmp_path / "legal"
    (legal / "contract").mkdir(parents=True)
    (legal / "tort").mkdir()
    (legal / "contract" / "contract_breach.json").write_text(json.dumps([{"title": "Breach", "text": "A breach."}]))
    (legal / "tort" / "tort_negligence.json").symlink_to(elsewhere)
    assert main(["import", "--corpus", "Legal", str(legal), "--kind", "topics", "--database", url]) == 0
    out = capsys.readouterr().out
    assert "tort/tort_negligence.json: symbolic link skipped (only the folder's own files are read)" in out
    assert _docs(url, "Legal") == [("Breach", "A breach.")]
