"""`mrag-studio corpora`: list, rename and delete stored corpora, against a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import db
from services.cli.main import main
from tests.support.mini_corpus import mini_store


@pytest.fixture
def filled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """Corpus "Mini" (4 documents, 2 categories) with a query set of 2 queries, an index of 4 vectors of
    (8 + 2 x 4) float32 = 64 bytes each, and one evaluation run; plus an empty corpus "Empty"."""
    url, store, corpus_id, ids = mini_store(tmp_path, monkeypatch)
    try:
        qs = db.create_query_set(store, corpus_id, "Q")
        db.add_queries(store, qs.id, [{"text": "moon bread", "ground_truth": ids[::2]}, {"text": "soup"}])
        run = db.create_embedding_run(store, corpus_id, model_name="m", layer=0, pooling="mean",
                                      n_heads=2, head_dim=4, dim=8)
        db.save_vectors(store, run.id, ids, np.ones((4, 8)), np.ones((4, 2, 4)))
        db.create_eval_run(store, corpus_id=corpus_id, query_set_id=qs.id, embedding_run_id=run.id)
        db.create_corpus(store, "Empty")
    finally:
        store.close()
    return url, corpus_id


def _names(url: str) -> list[str]:
    store = db.open_store(url)
    try:
        return [c.name for c in db.list_corpora(store)]
    finally:
        store.close()


def test_list_shows_what_each_corpus_holds(filled, capsys) -> None:
    url, _ = filled
    assert main(["corpora", "--database", url]) == 0
    header, empty, mini = capsys.readouterr().out.splitlines()
    assert header.split() == ["corpus", "documents", "categories", "query", "sets", "queries", "indexes",
                              "vectors", "MB", "evaluations"]
    assert empty.split() == ["Empty", "0", "0", "0", "0", "0", "0.0", "0"]
    assert mini.split() == ["Mini", "4", "2", "1", "2", "1", "0.0", "1"]  # 256 bytes


def test_rename_and_its_refusals(filled, capsys) -> None:
    url, corpus_id = filled
    assert main(["corpora", "--rename", "Mini", "Tiny", "--description", "four docs", "--database", url]) == 0
    assert "renamed corpus 'Mini' to 'Tiny'" in capsys.readouterr().out
    store = db.open_store(url)
    try:
        info = db.get_corpus(store, corpus_id)
        assert (info.name, info.description, info.n_documents) == ("Tiny", "four docs", 4)
    finally:
        store.close()
    assert main(["corpora", "--rename", "Tiny", "Empty", "--database", url]) == 2
    assert "error: A corpus named 'Empty' already exists." in capsys.readouterr().err
    assert main(["corpora", "--rename", "Tiny", "  ", "--database", url]) == 2
    assert "must not be empty" in capsys.readouterr().err
    assert main(["corpora", "--rename", "Nope", "X", "--database", url]) == 2
    assert "unknown corpus 'Nope' (corpora: 'Empty', 'Tiny')" in capsys.readouterr().err
    assert _names(url) == ["Empty", "Tiny"]


def test_delete_needs_yes_and_then_removes_everything(filled, capsys) -> None:
    url, _ = filled
    assert main(["corpora", "--delete", "Mini", "--database", url]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("error: deleting 'Mini' would remove 4 documents, 2 categories, 1 query set (2 queries), "
                           "1 index (0.0 MB of vectors), 1 evaluation run; add --yes to delete it")
    assert _names(url) == ["Empty", "Mini"]
    assert main(["corpora", "--delete", "Mini", "--yes", "--database", url]) == 0
    assert capsys.readouterr().out.startswith("deleted corpus 'Mini': 4 documents")
    assert _names(url) == ["Empty"]
    store = db.open_store(url)
    try:
        assert db.list_query_sets(store) == [] and db.list_eval_runs(store) == []
    finally:
        store.close()


def test_a_corpus_something_works_on_is_not_deleted(filled, capsys) -> None:
    """An index build, an evaluation run, a pre-annotation or a query generation into one of its sets that some
    process keeps alive (the app beside the CLI) keeps the corpus from being deleted under it, each named (and a
    leased work since when); once their processes are silent, it can be."""
    from datetime import datetime, timedelta

    from sqlalchemy import update

    from db.models import AppMarker, EmbeddingRun, EvalRun, utcnow
    from services.workflows.annotation import preannotation_lease
    from services.workflows.corpus import work_in_progress
    from services.workflows.querysets import generation_lease

    url, corpus_id = filled
    store = db.open_store(url)
    (run,) = db.list_embedding_runs(store, corpus_id)
    (ev,) = db.list_eval_runs(store, corpus_id=corpus_id)
    (qs,) = db.list_query_sets(store, corpus_id)
    db.claim_embedding_run(store, run.id, "gpu-box pid 11 #a")
    db.claim_eval_run(store, ev.id, "gpu-box pid 12 #b")
    db.take_lease(store, preannotation_lease(corpus_id), "laptop pid 13 #c", "Pre-annotation of corpus", corpus_id)
    db.take_lease(store, generation_lease(qs.id), "laptop pid 14 #d", "Query generation for set", qs.id)
    with store.session() as session:  # when those two leases were taken, for the message
        session.execute(update(AppMarker).values(created_at=datetime(2026, 11, 24, 12, 0, 5)))
    assert main(["corpora", "--delete", "Mini", "--yes", "--database", url]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: 'Mini' cannot be deleted now: index #{run.id} (m, layer 0) is being built (gpu-box pid 11); "
        f"evaluation run #{ev.id} is running (gpu-box pid 12); it is being pre-annotated (laptop pid 13, started "
        f"2026-11-24 12:00:05 UTC); queries are being generated into query set 'Q' (#{qs.id}) (laptop pid 14, "
        "started 2026-11-24 12:00:05 UTC); stop that first, or wait until it ends")
    with store.session() as session:  # the evaluation run by its name, when it has one
        session.execute(update(EvalRun).values(name="Space baseline"))
    assert f"evaluation run 'Space baseline' (#{ev.id}) is running (gpu-box pid 12)" in " ".join(
        work_in_progress(store, corpus_id))
    assert _names(url) == ["Empty", "Mini"]
    old = utcnow() - timedelta(seconds=db.LIVE_WINDOW_S + 1)
    with store.session() as session:  # their processes died
        session.execute(update(EmbeddingRun).values(heartbeat_at=old))
        session.execute(update(EvalRun).values(heartbeat_at=old))
        session.execute(update(AppMarker).values(updated_at=old))
    store.close()
    assert main(["corpora", "--delete", "Mini", "--yes", "--database", url]) == 0
    assert _names(url) == ["Empty"]


@pytest.mark.parametrize("argv, message", [
    (["--yes"], "--yes goes with --delete"),
    (["--description", "x"], "--description goes with --rename"),
])
def test_flags_out_of_place_are_refused(filled, capsys, argv: list[str], message: str) -> None:
    url, _ = filled
    assert main(["corpora", *argv, "--database", url]) == 2
    assert f"error: {message}" in capsys.readouterr().err


def test_a_database_another_writer_holds_ends_with_one_line(filled, monkeypatch, capsys) -> None:
    """Held while the command opens the store (a real lock: SQLite's BEGIN IMMEDIATE from another
    connection), or when its write comes (simulated): one ``error:`` line, status 2, nothing changed."""
    import sqlite3

    url, _ = filled
    monkeypatch.setattr(db.engine, "BUSY_TIMEOUT_S", 0.3)
    other = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        assert main(["corpora", "--rename", "Mini", "Maxi", "--database", url]) == 2
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert capsys.readouterr().err == ("error: cannot open the database: another writer held the database for 0.3 s; "
                                       "nothing was written, try again\n")

    def held(*_args: object, **_kw: object) -> None:
        raise db.BusyError("another writer held the database for 0.3 s; nothing was written, try again")

    monkeypatch.setattr(db, "delete_corpus", held)
    assert main(["corpora", "--delete", "Mini", "--yes", "--database", url]) == 2
    assert capsys.readouterr().err == ("error: another writer held the database for 0.3 s; nothing was written, "
                                       "try again\n")
    assert _names(url) == ["Empty", "Mini"]


def test_a_database_in_a_folder_that_does_not_exist_is_refused_not_created(tmp_path: Path, capsys) -> None:
    """Before, --database sqlite:////nonexistent/dir/x.db created the folders and an empty database there."""
    missing = tmp_path / "nonexistent" / "dir"
    assert main(["corpora", "--database", f"sqlite:///{missing / 'x.db'}"]) == 2
    assert capsys.readouterr().err == (
        f"error: cannot open the database: the folder of the SQLite database {missing / 'x.db'} ({missing}) does "
        "not exist; create it first (nothing creates folders for a database URL that is given), or give another "
        "database URL\n")
    assert not (tmp_path / "nonexistent").exists()
