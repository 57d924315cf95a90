"""An import killed (SIGKILL) or interrupted (SIGINT, Ctrl+C) half-way leaves nothing anyone sees (issue 32 item 2).

Before, the corpus was created in a transaction of its own and removed only on ``except Exception``: a ``kill -9`` or a
Ctrl+C mid-import left an empty corpus committed, listed for everyone, and importing again under its name was
refused. Now the import writes into a corpus nobody sees until its last transaction publishes it: killed, it stays
hidden and the next start (``db.open_store``) deletes it; interrupted, its process deletes it before it exits. Either
way, importing again under the same name works. A real process runs the import here (the workflow in a script, and
``mrag-studio import``), killed once a part of it is written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

import db
from services.ingest import ImportRecord
from services.workflows import corpus as cw

pytestmark = pytest.mark.every_backend
ROOT = Path(__file__).resolve().parents[3]

IMPORT_SCRIPT = """
import sys, time
import db
from services.ingest import ImportRecord
from services.workflows import corpus as cw

store = db.open_store(sys.argv[1])

def records():
    for i in range(100_000):
        if i == 2_500:  # a first chunks are written by now: the test may stop this process
            print("reading", flush=True)
        if i >= 2_500:
            time.sleep(0.002)  # a slow source (a large file), so the stop lands mid-import
        yield ImportRecord(title=f"Row {i}", text=f"text of row {i}", label=f"label {i % 4}", source=f"big.csv row {i}")

target = sys.argv[2]
if target.startswith("#"):
    cw.import_records(store, records(), corpus_id=int(target[1:]))
else:
    cw.import_records(store, records(), new_name=target)
print("done", flush=True)
"""


def _url(store: db.Store) -> str:
    return store.engine.url.render_as_string(hide_password=False)


def _count(store: db.Store, table: str) -> int:
    """Rows of ``table`` read with plain SQL (whatever the code hides)."""
    with store.session(readonly=True) as session:  # a reader: never waits for a writer
        return int(session.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one())


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _ctrl_c_default() -> None:
    """In the child before it starts: Ctrl+C (SIGINT) as a terminal delivers it, even when the tests run as a
    background job (whose children inherit SIGINT ignored, so Python would never raise KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop(proc: subprocess.Popen, how: signal.Signals) -> int:
    proc.send_signal(how)
    try:
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


def _after_the_stop(store: db.Store, how: signal.Signals, name: str, corpora_before: int) -> None:
    """What everyone sees after the stopped import of a new corpus ``name``: nothing of it; a killed one is gone after
    the next start, an interrupted one at once. Then importing under the same name works."""
    assert all(c.name != name for c in db.list_corpora(store))
    with pytest.raises(db.NotFoundError):
        db.get_corpus_by_name(store, name)
    if how == signal.SIGINT:  # its process discarded it before exiting
        assert _count(store, "corpora") == corpora_before
    with db.open_store(_url(store)) as again:  # the next start
        assert _count(again, "corpora") == corpora_before
        assert _count(again, "documents") == sum(c.n_documents for c in db.list_corpora(again))
        result = cw.import_records(again, [ImportRecord("Again", "imported again", "x", "again.csv row 1")],
                                   new_name=name)
        assert db.get_corpus(again, result.corpus_id).n_documents == 1


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_a_stopped_import_into_a_new_corpus_leaves_nothing(store: db.Store, how: signal.Signals) -> None:
    proc = subprocess.Popen([sys.executable, "-c", IMPORT_SCRIPT, _url(store), "Big"], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_default)
    try:
        assert proc.stdout.readline().strip() == "reading"
    finally:
        rc = _stop(proc, how)
    assert rc != 0
    assert all(c.name != "Big" for c in db.list_corpora(store))  # before: an empty corpus 'Big' was listed
    if how == signal.SIGKILL:  # its first chunks were committed, hidden, until the next start deletes them
        assert _count(store, "documents") >= 1_000
    _after_the_stop(store, how, "Big", 0)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_a_stopped_import_into_an_existing_corpus_leaves_it_as_it_was(store: db.Store, how: signal.Signals) -> None:
    """Written in one transaction, this held before too; written in chunks, they go into a corpus of their own that
    is moved over only at the end, so the corpus shows nothing of a stopped import either."""
    news = db.create_corpus(store, "News")
    db.add_documents(store, news.id, [{"title": "Old", "text": "an old document", "label": "label 1"}])
    before = db.get_corpus(store, news.id)
    proc = subprocess.Popen([sys.executable, "-c", IMPORT_SCRIPT, _url(store), f"#{news.id}"], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_default)
    try:
        assert proc.stdout.readline().strip() == "reading"
        assert db.get_corpus(store, news.id) == before  # nothing of it shows while it is written
    finally:
        _stop(proc, how)
    assert db.get_corpus(store, news.id) == before
    assert [c.name for c in db.list_corpora(store)] == ["News"]
    with db.open_store(_url(store)) as again:  # the next start: the hidden part is gone
        assert _count(again, "corpora") == 1 and _count(again, "documents") == 1
        assert db.get_corpus(again, news.id) == before


def _big_csv(path: Path, rows: int) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        fh.write("title,text,label\n")
        for i in range(rows):
            fh.write(f"Row {i},This is the text of row number {i} of the large table,label {i % 4}\n")
    return path


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_a_stopped_cli_import_leaves_nothing(store: db.Store, tmp_path: Path, how: signal.Signals) -> None:
    """``mrag-studio import`` of a 60,000-row CSV, stopped once a part of it is written."""
    csv = _big_csv(tmp_path / "big.csv", 60_000)
    proc = subprocess.Popen([sys.executable, "-m", "services", "import", "--corpus", "Big", "--database", _url(store),
                             str(csv)], cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_ctrl_c_default)
    try:
        deadline = time.monotonic() + 120
        seen_corpus = None
        while proc.poll() is None and time.monotonic() < deadline:
            if _count(store, "corpora"):
                seen_corpus = seen_corpus or time.monotonic()
                # mid-import: a chunk is committed (or, written in one transaction, the corpus has been there a while)
                if _count(store, "documents") >= 1_000 or time.monotonic() - seen_corpus > 2:
                    break
            time.sleep(0.05)
        assert proc.poll() is None, f"the import ended before it could be stopped: {proc.stderr.read()}"
    finally:
        rc = _stop(proc, how)
    assert rc != 0
    _after_the_stop(store, how, "Big", 0)
    if how == signal.SIGINT:
        assert "interrupted: nothing was imported" in proc.stderr.read()
