"""`mrag-studio export`: corpus and query-set files written headless and read back by `import` and
`queries` (round trips through the CLI), written whole or not at all, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import db
from services.cli.main import main
from tests.support.mini_corpus import MINI_DOCS, mini_store


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Mini (4 labelled documents) plus one document without a label, and a query set of two queries."""
    u, store, corpus_id, ids = mini_store(tmp_path, monkeypatch)
    db.add_documents(store, corpus_id, [{"title": "Note", "text": "An unlabelled note about tea."}])
    qs = db.create_query_set(store, corpus_id, "Set A")
    db.add_queries(store, qs.id, [{"text": "red planet storms", "ground_truth": [ids[1]]},
                                  {"text": "moon orbit and yeast bread", "ground_truth": [ids[0], ids[2]]}])
    store.close()
    return u


def _docs(url: str, name: str) -> list[tuple[str, str, str | None]]:
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, name)
    out = sorted((d.title, d.text, d.label) for d in db.list_documents(store, corpus.id, limit=None).items)
    store.close()
    return out


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_corpus_written_and_imported_again_is_the_same(url: str, tmp_path: Path, capsys, suffix: str) -> None:
    out = tmp_path / f"mini{suffix}"
    assert main(["export", str(out), "--corpus", "Mini", "--database", url]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: 5 documents of 'Mini' as ")
    assert main(["import", str(out), "--corpus", "Copy", "--database", url]) == 0
    assert _docs(url, "Copy") == _docs(url, "Mini")
    assert ("Note", "An unlabelled note about tea.", None) in _docs(url, "Copy")


def test_benchmark_articles_need_labels_unless_skipped(url: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "articles.json"
    out.write_text("keep me")
    assert main(["export", str(out), "--corpus", "Mini", "--database", url]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot export 'Mini': ") and "'Note'" in err
    assert out.read_text() == "keep me"  # a refused export leaves the file as it was
    assert main(["export", str(out), "--corpus", "Mini", "--skip-unlabeled", "--database", url]) == 0
    articles = json.loads(out.read_text())
    assert sorted((a["title"], a["label"]) for a in articles) == sorted((d["title"], d["label"]) for d in MINI_DOCS)
    assert not list(tmp_path.glob(".articles.json.*.part"))  # no temporary file left


def test_a_query_set_written_and_imported_again_names_the_same_documents(url: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "queries.json"
    assert main(["export", str(out), "--corpus", "Mini", "--query-set", "Set A", "--database", url]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}: 2 queries of query set 'Set A'"
    assert [q["topics"] for q in json.loads(out.read_text())] == [["Mars"], ["Moon", "Bread"]]
    assert main(["queries", str(out), "--corpus", "Mini", "--name", "Set B", "--database", url]) == 0
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    a, b = (db.list_queries(store, q.id) for q in sorted(db.list_query_sets(store, corpus.id), key=lambda q: q.name))
    store.close()
    assert [(q.text, q.ground_truth) for q in a] == [(q.text, q.ground_truth) for q in b]


def test_bad_input_is_one_line(url: str, tmp_path: Path, capsys) -> None:
    assert main(["export", str(tmp_path / "x.txt"), "--corpus", "Mini", "--database", url]) == 2
    assert capsys.readouterr().err.strip() == ("error: cannot tell the format from 'x.txt': give --format (jsonl, "
                                               "csv, parquet, benchmark)")
    assert main(["export", str(tmp_path / "nowhere" / "x.csv"), "--corpus", "Mini", "--database", url]) == 2
    assert capsys.readouterr().err.strip() == (f"error: cannot write {tmp_path / 'nowhere' / 'x.csv'}: folder "
                                               f"{tmp_path / 'nowhere'} does not exist")
    assert main(["export", str(tmp_path), "--corpus", "Mini", "--database", url]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path} is a folder: give the file to write"
    assert main(["export", str(tmp_path / "q.json"), "--corpus", "Mini", "--query-set", "Nope", "--database",
                 url]) == 2
    assert capsys.readouterr().err.strip() == "error: unknown query set 'Nope' in corpus 'Mini' (query sets: 'Set A')"
    assert main(["export", str(tmp_path / "q.json"), "--corpus", "Mini", "--query-set", "Set A", "--format", "csv",
                 "--database", url]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --query-set writes MRAG benchmark query JSON")
    store = db.open_store(url)
    db.create_corpus(store, "Empty")
    store.close()
    assert main(["export", str(tmp_path / "e.csv"), "--corpus", "Empty", "--database", url]) == 2
    assert capsys.readouterr().err.strip() == "error: cannot export 'Empty': the corpus has no documents to export"
    assert not list(tmp_path.glob("*.csv")) and not list(tmp_path.glob("*.txt"))


def test_machine_suggestions_come_back_as_suggestions_not_labels(url: str, tmp_path: Path, capsys) -> None:
    """An export marks a label nobody decided on label_source = suggestion; importing it back made it a decided
    label (an 'import' decision), so a re-imported corpus looked fully reviewed. It comes back as a suggestion."""
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    note = next(d for d in db.list_documents(store, corpus.id, limit=None).items if d.title == "Note")
    space = next(c for c in db.list_categories(store, corpus.id) if c.name == "space")
    db.add_suggestions(store, [{"document_id": note.id, "agent": "llm:x", "category_id": space.id}])
    store.close()
    for suffix in (".jsonl", ".csv", ".parquet"):
        out = tmp_path / f"mini{suffix}"
        assert main(["export", str(out), "--corpus", "Mini", "--database", url]) == 0
        assert main(["import", str(out), "--corpus", f"Copy{suffix}", "--database", url]) == 0
        capsys.readouterr()
        store = db.open_store(url)
        copy = db.get_corpus_by_name(store, f"Copy{suffix}")
        labels = {titled.title: labels_of for titled, labels_of in (
            (d, db.effective_labels(store, copy.id).get(d.id)) for d in db.list_documents(store, copy.id).items)}
        assert (labels["Note"].category, labels["Note"].source) == ("space", "suggestion"), suffix
        assert (labels["Moon"].category, labels["Moon"].source) == ("space", "decision")
        note_copy = next(d for d in db.list_documents(store, copy.id).items if d.title == "Note")
        assert db.list_decisions(store, note_copy.id) == []
        store.close()


def test_a_link_fifo_or_device_at_the_target_is_refused_and_left_as_it_is(url: str, tmp_path: Path, capsys) -> None:
    """Before, the temporary file was renamed over whatever was at PATH: a FIFO or a symbolic link was replaced."""
    import os

    kept = tmp_path / "kept.csv"
    kept.write_text("kept")
    link = tmp_path / "link.csv"
    link.symlink_to(kept)
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    for path, what in ((link, "a symbolic link"), (fifo, "a FIFO"), (Path("/dev/null"), "a character device")):
        assert main(["export", str(path), "--corpus", "Mini", "--format", "csv", "--database", url]) == 2
        assert capsys.readouterr().err.strip() == (f"error: cannot write {path}: it is {what}, not a regular file; "
                                                   "give a new file name, or a regular file to replace")
    assert link.is_symlink() and fifo.is_fifo() and kept.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".csv") == ["kept.csv", "link.csv", "pipe.csv"]
    assert not list(tmp_path.glob(".*.part"))


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_users_umask_and_a_replaced_one_keeps_its_mode(url: str, tmp_path: Path, capsys,
                                                                            umask: int, mode: int) -> None:
    """Before, every export was written 0600 (the temporary file's mode), whatever the umask."""
    import os

    old = os.umask(umask)
    try:
        new = tmp_path / "new.jsonl"
        assert main(["export", str(new), "--corpus", "Mini", "--database", url]) == 0
        replaced = tmp_path / "old.jsonl"
        replaced.write_text("old")
        replaced.chmod(0o640)
        assert main(["export", str(replaced), "--corpus", "Mini", "--database", url]) == 0
    finally:
        os.umask(old)
    assert new.stat().st_mode & 0o777 == mode
    assert replaced.stat().st_mode & 0o777 == 0o640 and replaced.read_bytes() == new.read_bytes()
