"""The headless pipeline as a researcher runs it (import -> annotate -> index -> eval -> export), against a real
SQLite store: the counts and hints each command prints, and a stop asked from elsewhere."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
import services.workflows.indexing as indexing  # noqa: E402
from mrag_core.cli_basics import format_table  # noqa: E402
from services.cli.common import every_few_seconds  # noqa: E402
from services.cli.main import main  # noqa: E402
from tests.support.mini_corpus import mini_store  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    return f"sqlite:///{tmp_path / 't.db'}"


def _docs(url: str, name: str) -> list[tuple[str, str | None]]:
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, name)
        return sorted((d.title, d.label) for d in db.list_documents(store, corpus.id, limit=None).items)
    finally:
        store.close()


def test_tables_with_different_columns_are_each_read_with_their_own(url: str, tmp_path: Path, capsys) -> None:
    """A CSV (title, text, label) and a JSONL (title, body, category) in one import: each file's columns are guessed
    on their own. Before, the CSV's mapping was used for both, so every JSONL row was dropped under one file-level
    error and the counts did not add up (read 3 rows: 1 document, 1 error)."""
    table = tmp_path / "a.csv"
    with table.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["title", "text", "label"])
        w.writerow(["Moon", "The moon orbits the earth.", "space"])
    lines = tmp_path / "b.jsonl"
    lines.write_text(json.dumps({"title": "Bread", "body": "Bread rises with yeast.", "category": "food"}) + "\n"
                     + json.dumps({"title": "Soup", "body": "A tomato soup.", "category": "food"}) + "\n")
    assert main(["import", "--corpus", "Both", str(table), str(lines), "--database", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "read 3 rows: 3 documents to import in 2 categories; 0 errors (left out), 0 warnings"
    assert _docs(url, "Both") == [("Bread", "food"), ("Moon", "space"), ("Soup", "food")]


def test_import_counts_are_in_words_and_adding_nothing_new_is_no_error(url: str, tmp_path: Path, capsys) -> None:
    """'1 document ... in 1 category; 1 error' (it said '1 document(s) ... in 1 categories; 1 error(s)'), files of a
    ZIP or text import counted as files; an --add whose every text is already there says so and exits 0 (it ended
    in 'error: ... no document is left after the problems above')."""
    table = tmp_path / "one.csv"
    table.write_text("title,text,label\nMoon,The moon orbits the earth.,space\nEmpty,,space\n")
    assert main(["import", "--corpus", "One", str(table), "--database", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "read 2 rows: 1 document to import in 1 category; 1 error (left out), 0 warnings"
    assert out[-1].startswith("imported 1 document into new corpus 'One';")
    note = tmp_path / "note.txt"
    note.write_text("A single note about tea.")
    assert main(["import", "--corpus", "Notes", "--label", "drinks", str(note), "--database", url]) == 0
    assert capsys.readouterr().out.startswith("read 1 file: 1 document to import in 1 category; 0 errors")
    assert main(["import", "--corpus", "One", "--add", str(table), "--database", url]) == 0
    captured = capsys.readouterr()
    assert "1 duplicate left out, 1 error (left out), 1 warning" in captured.out
    assert captured.out.splitlines()[-1] == ("nothing to import: every document without an error is already in "
                                             "corpus 'One'; nothing was written")
    assert captured.err == ""
    assert _docs(url, "One") == [("Moon", "space")]


def test_queries_import_counts_in_words(url: str, tmp_path: Path, capsys) -> None:
    table = tmp_path / "d.csv"
    table.write_text("title,text,label\nMoon,The moon orbits the earth.,space\n")
    assert main(["import", "--corpus", "D", str(table), "--database", url]) == 0
    queries = tmp_path / "q.json"
    queries.write_text(json.dumps([{"topics": ["Moon"], "text": "What orbits the earth?", "fusion": []}]))
    capsys.readouterr()
    assert main(["queries", "--corpus", "D", "--name", "Q", str(queries), "--database", url]) == 0
    assert capsys.readouterr().out.strip() == "query set 'Q' (#1): 1 query imported, 0 flagged, 0 rows skipped"


def test_undecided_only_counts_only_undecided_documents(url: str, tmp_path: Path, capsys) -> None:
    """annotate --undecided-only on 3 labelled and 2 unlabelled documents: 2 suggestions stored and 0 of those without
    a label decision already had one. Before, the labelled documents were counted as 'already had one' (3), which
    they never had; the workflow's summary said the same (already_done 3)."""
    from services.workflows import annotation as aw

    table = tmp_path / "mixed.csv"
    table.write_text("title,text,label\nMoon,The moon orbits the earth.,space\nMars,Mars is a red planet.,space\n"
                     "Bread,Bread rises with yeast.,food\nVenus,Venus is a hot planet.,\nSoup,A tomato soup.,\n")
    assert main(["import", "--corpus", "Mixed", str(table), "--database", url]) == 0
    capsys.readouterr()
    assert main(["annotate", "--corpus", "Mixed", "--annotator", "zero-shot", "--undecided-only", "--threads", "1",
                 "--database", url]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("Mixed: 2 suggestions stored, 0 failed, by zero-shot:minilm")
    assert out.endswith("; 0 of those without a label decision already had one")
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, "Mixed")
        embed = lambda texts: __import__("numpy").ones((len(texts), 3))  # noqa: E731 - any vectors: only counts
        summary = aw.preannotate(store, corpus.id, aw.ZeroShotAnnotator(embed, "ones"), undecided_only=True)
        assert (summary.todo, summary.already_done) == (2, 0)
        again = aw.preannotate(store, corpus.id, aw.ZeroShotAnnotator(embed, "ones"), undecided_only=True)
        assert (again.todo, again.already_done) == (0, 2)
        every = aw.preannotate(store, corpus.id, aw.ZeroShotAnnotator(embed, "ones"))
        assert (every.todo, every.already_done) == (3, 2)
    finally:
        store.close()


def test_progress_does_not_repeat_its_last_line() -> None:
    """A batch's last report and the batch's own report are the same (16/16): shown once (it was printed twice)."""
    shown: list[tuple[str, int, int]] = []
    progress = every_few_seconds(lambda *a: shown.append(a))
    for done in (0, 16, 16):
        progress("documents", done, 16)
    progress("queries", 3, 3)
    assert shown == [("documents", 0, 16), ("documents", 16, 16), ("queries", 3, 3)]


def test_summary_table_keeps_long_strategy_names_whole() -> None:
    """'multi-query-mrag' (16 characters) was cut to 'multi-query-mra' in eval's and bench's table."""
    Row = namedtuple("Row", "strategy n_aspects k rsr csr weighted n_queries")
    text = format_table([Row("standard", 1, 1, 1.0, 1.0, 1.0, 3), Row("multi-query-mrag", 1, 1, 0.5, 1.0, 0.667, 3)])
    lines = text.splitlines()
    assert lines[2].split()[0] == "multi-query-mrag"
    assert len({len(line) for line in lines}) == 1  # columns still line up


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_a_closed_pipe_ends_quietly(url: str, tmp_path: Path, unbuffered: str) -> None:
    """`corpora | head -1` in a real process: the reader has gone when the table is written. Before, a
    BrokenPipeError traceback (unbuffered) or 'Exception ignored ... BrokenPipeError' at exit; now nothing on stderr,
    exit status 141 as for SIGPIPE."""
    store = db.open_store(url)
    for i in range(3):
        db.create_corpus(store, f"C{i}")
    store.close()
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered, "MRAG_DATABASE_URL": url}
    proc = subprocess.Popen([sys.executable, "-m", "services", "corpora"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the command writes
    _, err = proc.communicate(timeout=120)
    assert err.decode() == ""
    assert proc.returncode == 141


def test_export_skip_unlabeled_counts_what_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The benchmark export with --skip-unlabeled said '5 documents' when it wrote 4; now it counts the written ones
    and says how many were left out. The refusal names --skip-unlabeled, which other formats refuse (it was silently
    ignored there)."""
    url, store, corpus_id, _ = mini_store(tmp_path, monkeypatch)
    db.add_documents(store, corpus_id, [{"title": "Note", "text": "An unlabelled note about tea."}])
    store.close()
    out = tmp_path / "articles.json"
    assert main(["export", str(out), "--corpus", "Mini", "--no-suggestions", "--database", url]) == 2
    assert capsys.readouterr().err.strip().endswith("; or pass --skip-unlabeled to leave them out")
    assert main(["export", str(out), "--corpus", "Mini", "--no-suggestions", "--skip-unlabeled",
                 "--database", url]) == 0
    said = capsys.readouterr().out.strip()
    assert said.startswith(f"wrote {out}: 4 documents of 'Mini' as ")
    assert said.endswith("; 1 unlabelled document left out")
    assert len(json.loads(out.read_text())) == 4
    lines = tmp_path / "docs.jsonl"
    assert main(["export", str(lines), "--corpus", "Mini", "--skip-unlabeled", "--database", url]) == 2
    assert capsys.readouterr().err.strip() == ("error: --skip-unlabeled goes with the benchmark format; JSON Lines "
                                               "keeps unlabelled documents with an empty label")
    assert not lines.exists()


def test_a_rebuild_stopped_from_elsewhere_says_so_and_resumes_without_rebuild(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The app's Stop button (a stop request in the database) stops `index --rebuild` after its batch. The command
    said 'cancelled ...; run the same command again to resume' and nothing about why: the same command (--rebuild)
    started yet another index, leaving this one unfinished. Now it says to run it without --rebuild, and that the
    stop came from elsewhere; without --rebuild the stopped index is resumed (no third index)."""
    url, store, corpus_id, _ = mini_store(tmp_path, monkeypatch)
    store.close()
    argv = ["index", "--corpus", "Mini", "--database", url, "--threads", "1", "--batch-size", "1"]
    assert main(argv) == 0
    capsys.readouterr()
    monkeypatch.setattr(db, "BEAT_EVERY_S", 0.05)
    real = indexing.embed_texts
    calls: list[int] = []

    def embed_then_stop_from_the_app(lm, texts, **kw):
        calls.append(1)
        if len(calls) == 1:
            other = db.open_store(url)  # as the app's server would, on its own connection
            (running,) = [r for r in db.list_embedding_runs(other, corpus_id) if r.status == "running"]
            assert db.request_embedding_stop(other, running.id)
            other.close()
            time.sleep(0.5)  # a few heartbeats: the next one finds the request
        return real(lm, texts, **kw)

    monkeypatch.setattr(indexing, "embed_texts", embed_then_stop_from_the_app)
    assert main([*argv, "--rebuild"]) == 1
    captured = capsys.readouterr()
    assert captured.out.strip() == ("index #2: cancelled with 1 of 4 documents saved; run the same command without "
                                    "--rebuild again to resume")
    assert "stopped: it was asked to stop from elsewhere (a Stop button in the app)" in captured.err
    assert "stopping after the current batch" not in captured.err  # no Ctrl+C was pressed
    monkeypatch.setattr(indexing, "embed_texts", real)
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("index #2: done, 4 documents (")
    store = db.open_store(url)
    assert sorted(r.id for r in db.list_embedding_runs(store, corpus_id)) == [1, 2]
    store.close()


def test_an_eval_stopped_from_elsewhere_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """`eval --stop ID` (or the Evaluation Runs page's Stop) stops a running `eval` after its batch: it printed only
    'run N: stopped' and the resume hint, as after a Ctrl+C it never saw; now it says the stop came from elsewhere."""
    from services.workflows import evaluation_runs as er

    url, store, corpus_id, ids = mini_store(tmp_path, monkeypatch)
    qs = db.create_query_set(store, corpus_id, "Set A")
    db.add_queries(store, qs.id, [{"text": "red planet storms", "ground_truth": [ids[1]]},
                                  {"text": "moon orbit and yeast bread", "ground_truth": [ids[0], ids[2]]}])
    store.close()
    monkeypatch.setattr(db, "BEAT_EVERY_S", 0.05)
    real = er.evaluate
    calls: list[int] = []

    def evaluate_then_stop_from_elsewhere(*a, **kw):
        calls.append(1)
        out = real(*a, **kw)
        if len(calls) == 1:  # while the first batch (standard) is scored
            other = db.open_store(url)
            (running,) = db.list_eval_runs(other)
            assert main(["eval", "--stop", str(running.id), "--database", url]) == 0
            other.close()
            time.sleep(0.5)  # a few heartbeats: the next one finds the request
        return out

    monkeypatch.setattr(er, "evaluate", evaluate_then_stop_from_elsewhere)
    assert main(["eval", "--corpus", "Mini", "--query-set", "Set A", "--strategies", "standard,mrag", "--c", "4",
                 "--threads", "1", "--database", url]) == 1
    captured = capsys.readouterr()
    assert any(line.startswith("run 1: stopped, ") for line in captured.out.splitlines())
    err = captured.err.strip().splitlines()
    assert err[-3:] == ["stopped: it was asked to stop from elsewhere (a Stop button in the app, or eval --stop), or "
                        "another process took the work over", "note: mrag scored no query yet and is not in it",
                        "eval --resume 1 continues it"]
