"""db.imports: an import written in chunks into a hidden corpus, published (or discarded) whole, on every backend."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import update

import db
from db import Store
from db.models import AppMarker, utcnow

ME = f"{socket.gethostname()} pid 1 #mine"  # pid 1 runs: process_gone() says no


def _docs(*texts: str, label: str | None = None) -> list[dict[str, object]]:
    return [{"title": t.split()[0], "text": t, "label": label, "source": "t.csv"} for t in texts]


def _expire(store: Store, corpus_id: int) -> None:
    """Age the import's lease past the live window (as when its process stopped beating)."""
    with store.session() as session:
        session.execute(update(AppMarker).where(AppMarker.name == db.import_lease(corpus_id))
                        .values(updated_at=utcnow() - timedelta(seconds=db.LIVE_WINDOW_S + 1)))


def _dead_owner() -> str:
    """An owner naming a process of this host that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{socket.gethostname()} pid {proc.pid} #dead"


def test_an_import_is_hidden_until_published(store: Store, count_rows: Callable[[str], int]) -> None:
    hidden = db.begin_import(store, "News", ME, "imported news")
    first = db.add_import_documents(store, hidden, ME, _docs("a goal was scored", "the vote was close", label="x"))
    assert first.added == 2
    # nobody sees it: not listed, not found by name or id, no footprint, and its name is taken
    assert db.list_corpora(store) == [] and db.corpus_footprints(store) == {}
    with pytest.raises(db.NotFoundError):
        db.get_corpus_by_name(store, "News")
    with pytest.raises(db.NotFoundError):
        db.get_corpus(store, hidden)
    with pytest.raises(db.DuplicateError, match=r"'News' is being imported now \(\S+ pid 1\)"):
        db.create_corpus(store, "News")
    with pytest.raises(db.DuplicateError, match="is being imported now"):
        db.begin_import(store, "News", "other pid 2 #b")
    second = db.add_import_documents(store, hidden, ME, _docs("a goal was scored", "rain all day"), first_index=2)
    assert (second.added, second.skipped_duplicates) == (1, 1)  # the text of an earlier chunk is skipped
    published = db.finish_import(store, hidden, ME)
    assert (published.added, published.skipped_duplicates) == (3, 0)
    info = db.get_corpus_by_name(store, "News")
    assert (info.id, info.n_documents, info.n_categories, info.description) == (hidden, 3, 1, "imported news")
    assert info.version == 2 and info.content_hash is not None  # bumped once, as one add_documents would
    assert [c.name for c in db.list_corpora(store)] == ["News"]
    assert count_rows("app_markers") == 0  # the lease is gone
    labels = db.effective_labels(store, hidden)
    assert sorted(lab.category for lab in labels.values()) == ["x", "x"]


def test_a_duplicate_without_dedupe_names_the_document_and_writes_nothing_of_its_chunk(store: Store) -> None:
    hidden = db.begin_import(store, "News", ME)
    db.add_import_documents(store, hidden, ME, _docs("one text", "two text"), dedupe=False)
    with pytest.raises(db.DuplicateError, match=r"Document #4 \('one'\) is the same as an earlier document of this "
                                                r"import"):
        db.add_import_documents(store, hidden, ME, _docs("three text", "one text"), dedupe=False, first_index=2)
    db.finish_import(store, hidden, ME)
    assert db.get_corpus(store, hidden).n_documents == 2  # the refused chunk left nothing


def test_an_import_into_an_existing_corpus_moves_documents_labels_and_categories(
        store: Store, count_rows: Callable[[str], int]) -> None:
    news = db.create_corpus(store, "News")
    db.add_documents(store, news.id, _docs("old sport text", label="sport"))
    before = db.get_corpus(store, news.id)
    hidden = db.begin_import(store, "(import #abc into #1)", ME)
    db.add_import_documents(store, hidden, ME, _docs("new sport text", label="sport")
                            + _docs("new politics text", "added meanwhile", label="politics"))
    assert db.get_corpus(store, news.id).n_documents == 1  # not there before it is published
    db.add_documents(store, news.id, _docs("added meanwhile"))  # another writer adds the same text meanwhile
    published = db.finish_import(store, hidden, ME, into=news.id)
    assert (published.added, published.skipped_duplicates) == (2, 1)
    after = db.get_corpus(store, news.id)
    assert (after.n_documents, after.n_categories) == (4, 2)
    assert after.version > before.version + 1 and after.labels_version > before.labels_version
    assert [c.name for c in db.list_corpora(store)] == ["News"]  # the hidden corpus is gone
    assert count_rows("corpora") == 1 and count_rows("app_markers") == 0
    rows = db.list_documents(store, news.id, limit=None).items
    assert sorted((d.text, d.label, d.label_source) for d in rows) == [
        ("added meanwhile", None, None), ("new politics text", "politics", "decision"),
        ("new sport text", "sport", "decision"), ("old sport text", "sport", "decision")]


def test_a_clash_without_dedupe_refuses_the_whole_import(store: Store) -> None:
    news = db.create_corpus(store, "News")
    hidden = db.begin_import(store, "(import #abc into #1)", ME)
    db.add_import_documents(store, hidden, ME, _docs("new text", "added meanwhile"), dedupe=False)
    db.add_documents(store, news.id, _docs("added meanwhile"))
    with pytest.raises(db.DuplicateError, match="'added' is already in the corpus"):
        db.finish_import(store, hidden, ME, into=news.id, dedupe=False)
    assert db.get_corpus(store, news.id).n_documents == 1
    db.abandon_import(store, hidden, ME)


def test_abandon_leaves_nothing(store: Store, count_rows: Callable[[str], int], monkeypatch: pytest.MonkeyPatch
                                ) -> None:
    monkeypatch.setattr(db.imports, "DISCARD_CHUNK", 3)  # several delete transactions
    hidden = db.begin_import(store, "News", ME)
    db.add_import_documents(store, hidden, ME, _docs(*(f"text {i}" for i in range(8)), label="x"))
    db.abandon_import(store, hidden, ME)
    for table in ("corpora", "documents", "categories", "decisions", "app_markers"):
        assert count_rows(table) == 0, table
    db.abandon_import(store, hidden, ME)  # twice: nothing to do
    assert db.begin_import(store, "News", ME) > 0  # the name is free again


def test_abandoned_imports_are_discarded_and_their_owner_told(store: Store, count_rows: Callable[[str], int]
                                                              ) -> None:
    dead = _dead_owner()
    assert db.process_gone(dead) and not db.process_gone(ME) and not db.process_gone("elsewhere pid 7 #x")
    live = db.begin_import(store, "Live", ME)
    db.add_import_documents(store, live, ME, _docs("live text"))
    silent = db.begin_import(store, "Silent", "elsewhere pid 7 #x")  # another host: once its lease expired
    db.add_import_documents(store, silent, "elsewhere pid 7 #x", _docs("silent text"))
    killed = db.begin_import(store, "Killed", dead)  # its process ended: discarded at once
    db.add_import_documents(store, killed, dead, _docs("killed text"))
    assert db.discard_abandoned_imports(store) == ["Killed"]
    _expire(store, silent)
    assert db.discard_abandoned_imports(store) == ["Silent"]
    with pytest.raises(db.ImportLostError, match="nothing of it was kept"):
        db.add_import_documents(store, silent, "elsewhere pid 7 #x", _docs("more"))
    with pytest.raises(db.ImportLostError):
        db.finish_import(store, silent, "elsewhere pid 7 #x")
    assert count_rows("documents") == 1  # the live import's only
    db.begin_import(store, "Killed", ME)  # both names are free again
    db.begin_import(store, "Silent", ME)
    db.finish_import(store, live, ME)
    assert [c.name for c in db.list_corpora(store)] == ["Live"]


def test_open_store_discards_what_a_killed_import_left(store: Store) -> None:
    killed = db.begin_import(store, "Killed", _dead_owner())
    url = store.engine.url.render_as_string(hide_password=False)
    with db.open_store(url) as again:  # the next start
        with pytest.raises(db.NotFoundError):
            db.get_corpus(again, killed)
        assert db.begin_import(again, "Killed", ME) > 0


def test_corpus_texts_reads_every_text_in_batches(store: Store) -> None:
    news = db.create_corpus(store, "News")
    texts = [f"text number {i}" for i in range(7)]
    db.add_documents(store, news.id, [{"text": t} for t in texts])
    assert list(db.corpus_texts(store, news.id, batch=3)) == texts
    assert list(db.corpus_texts(store, news.id + 1)) == []
