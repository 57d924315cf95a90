"""Imports beside other writers (issue 32 item 3): a large import must not hold the write lock past the busy timeout.

Before, an import wrote every document in one transaction: a 200k-row import made an index build beside it give up
(BusyError after the 10 s busy timeout) and one of three 50k-row imports was refused. Now it commits in bounded
chunks. Here the busy timeout is cut to 2 s so that imports of some thousands of rows show the same on every backend:
the index build and every import must finish, with the same result as one at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

import db
import db.engine
from mrag_core.extraction import embed_texts
from services.ingest import ImportRecord
from services.workflows import corpus as cw
from services.workflows.indexing import build_embedding_run
from tests.services.workflows.test_indexing import doc_text, tiny_lm

pytestmark = pytest.mark.every_backend
BUSY_S = 2.0


@pytest.fixture
def busy_store(store: db.Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[db.Store]:
    """The same database opened anew with a busy timeout of :data:`BUSY_S` (read when a connection or write
    transaction starts)."""
    monkeypatch.setattr(db.engine, "BUSY_TIMEOUT_S", BUSY_S)
    with db.open_store(store.engine.url.render_as_string(hide_password=False)) as s:
        yield s


def records(prefix: str, n: int) -> Iterator[ImportRecord]:
    for i in range(n):
        yield ImportRecord(title=f"{prefix} {i}", text=f"{prefix} document {i}: " + doc_text(i) * 3,
                           label=("alpha", "beta", "gamma")[i % 3], source=f"{prefix}.csv row {i + 1}")


def _run(errors: list[BaseException], target, *args, **kwargs) -> threading.Thread:  # noqa: ANN001
    def work() -> None:
        try:
            target(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def test_an_index_build_beside_a_large_import_completes(busy_store: db.Store) -> None:
    """Index builds (small batches: many short write transactions, and heartbeats) run over and over while 12,000
    documents are imported; before, the import's one transaction held the lock for longer than the busy timeout and
    the build died with BusyError. Every build must finish with the vectors of a build alone."""
    store = busy_store
    lm = tiny_lm()
    tiny = db.create_corpus(store, "tiny")
    db.add_documents(store, tiny.id, [{"title": f"Doc {i}", "text": f"{doc_text(i)} n{i}"} for i in range(23)])
    ids = db.document_ids(store, tiny.id)
    alone = embed_texts(lm, [d.text for d in db.get_documents(store, ids)], kind="doc", layer=-1, batch_size=64)

    errors: list[BaseException] = []
    result: list[cw.ImportResult] = []
    importing = _run(errors, lambda: result.append(cw.import_records(store, records("big", 12_000),
                                                                     new_name="Big")))
    builds = 0
    while importing.is_alive():
        try:
            built = build_embedding_run(store, tiny.id, lm, layer=-1, batch_size=1, rebuild=True)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            break
        assert built.status == "done"
        builds += 1
        got_ids, std, heads = db.load_vectors(store, built.run.id)
        assert got_ids.tolist() == ids
        np.testing.assert_allclose(std, alone.standard, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(heads, alone.heads, rtol=1e-4, atol=1e-5)
    importing.join()
    assert errors == [] and builds >= 1
    assert (result[0].added, result[0].corpus_name) == (12_000, "Big")
    assert db.get_corpus_by_name(store, "Big").n_documents == 12_000


def test_three_imports_at_once_all_complete(busy_store: db.Store) -> None:
    """Three imports of 8,000 documents each at once: before, one waited for another's transaction past the busy
    timeout and was refused. Each corpus must hold exactly its own documents and labels, as one at a time."""
    store = busy_store
    errors: list[BaseException] = []
    names = ("First", "Second", "Third")
    threads = [_run(errors, cw.import_records, store, records(name, 8_000), new_name=name) for name in names]
    for thread in threads:
        thread.join()
    assert errors == []
    assert [(c.name, c.n_documents, c.n_categories) for c in db.list_corpora(store)] == [
        (name, 8_000, 3) for name in names]
    for name in names:
        corpus = db.get_corpus_by_name(store, name)
        stored = {(d.title, d.text, d.label) for d in db.list_documents(store, corpus.id, limit=None).items}
        assert stored == {(r.title, r.text, r.label) for r in records(name, 8_000)}
