"""services.workflows.maps: maps computed by a child process (UMAP's numba JIT stays out of the app's process),
cancelled at once, resumed where they stopped, never computed twice at once, gone with the server that started
them; and the demo index's UMAP maps wanted once it is built, until they are all stored.

The children here fit real UMAP maps on the demo index (96 documents, 13 spaces): the first fit of a process costs
its JIT (30-60 s on a 2-core box).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import db
from services.demo.store import demo_corpus_id
from services.workflows import maps as mw
from tests.support.demo_index import copy_demo_index

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def demo(tmp_path: Path, demo_index_db: Path, monkeypatch: pytest.MonkeyPatch):
    """The demo index database (a copy) and its finished index."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    copy_demo_index(demo_index_db, tmp_path / "t.db")
    store = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    run = db.list_embedding_runs(store, demo_corpus_id(store), status="done")[0]
    yield store, run
    store.close()


def wait_until(check, timeout: float, every: float = 0.2) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(every)
    return False


def test_the_demo_index_wants_its_umap_maps_until_they_are_all_stored(demo):
    store, run = demo
    assert mw.pending_demo_maps(store) is None  # nothing asked yet (an index built outside the app)
    assert mw.want_demo_maps(store, run)
    assert db.get_marker(store, mw.DEMO_MAPS_MARKER) == db.identity_key(run)
    assert mw.pending_demo_maps(store).id == run.id
    assert mw.maps_progress(store, run, "umap") == (0, 13)
    # 12 of 13 stored: still wanted, the missing one named
    xy = np.zeros((run.n_saved, 2), dtype=np.float32)
    ids = db.load_vectors(store, run.id)[0]
    for space in mw.missing_maps(store, run, "umap")[:12]:
        db.save_projection(store, run.id, space, "umap", xy, ids, seed=0)
    assert mw.missing_maps(store, run, "umap") == ["head:11"] and mw.maps_progress(store, run, "umap") == (12, 13)
    assert mw.pending_demo_maps(store).id == run.id
    assert mw.missing_maps(store, run, "pca") == ["standard", *(f"head:{h}" for h in range(12))]  # per method
    db.save_projection(store, run.id, "head:11", "umap", xy, ids, seed=0)
    assert mw.pending_demo_maps(store) is None and db.get_marker(store, mw.DEMO_MAPS_MARKER) is None  # all stored
    assert not mw.want_demo_maps(store, run)  # nothing left to want


def test_only_the_demo_corpus_index_is_wanted_and_a_cancel_forgets_it(demo):
    from mrag_core.models.loader import load_model
    from services.workflows.indexing import build_embedding_run

    store, run = demo
    other = db.create_corpus(store, "Mine")
    db.add_documents(store, other.id, [{"title": f"d{i}", "text": f"Text number {i} about rivers.", "label": "x"}
                                       for i in range(4)])
    mine = build_embedding_run(store, other.id, load_model("minilm", device="cpu"), layer=-1).run
    assert not mw.want_demo_maps(store, mine) and mw.pending_demo_maps(store) is None
    assert mw.want_demo_maps(store, run)
    assert not mw.drop_demo_maps(store, "7@2020-01-01")  # another index's cancel leaves the demo's wanted
    assert mw.pending_demo_maps(store) is not None
    assert mw.drop_demo_maps(store, db.identity_key(run))
    assert mw.pending_demo_maps(store) is None


def test_a_deleted_demo_index_is_no_longer_wanted(demo):
    store, run = demo
    assert mw.want_demo_maps(store, run)
    db.delete_embedding_run(store, run.id)
    assert mw.pending_demo_maps(store) is None and db.get_marker(store, mw.DEMO_MAPS_MARKER) is None


def test_a_job_resumes_with_the_missing_maps_only_and_gives_its_lease_back(demo):
    """11 maps stored by an earlier job that stopped: the child fits the 2 missing ones (real UMAP), leaves the 11
    as they were, and gives the lease back; the demo is then no longer pending."""
    store, run = demo
    assert mw.want_demo_maps(store, run)
    ids = db.load_vectors(store, run.id)[0]
    for i, space in enumerate(mw.missing_maps(store, run, "umap")[:11]):
        db.save_projection(store, run.id, space, "umap", np.full((len(ids), 2), i, np.float32), ids, seed=0)
    before = {p.space: p.id for p in db.list_projections(store, run.id)}
    job = mw.MapsJob(store, run).start()
    assert job.wait(600), "the maps job did not end"
    assert job.outcome == mw.MapsOutcome("done") and job.progress() == (13, 13)
    after = {p.space: p.id for p in db.list_projections(store, run.id)}
    assert {s: after[s] for s in before} == before and set(after) - set(before) == {"head:11", "head:10"}
    fitted = db.find_projection(store, run.id, "head:11", "umap", seed=0)
    assert fitted.coords.shape == (96, 2) and np.isfinite(fitted.coords).all() and fitted.model_blob is not None
    assert db.get_marker(store, mw.lease_name(run.id, "umap", 0)) is None
    assert mw.pending_demo_maps(store) is None


def test_cancel_stops_the_child_within_a_second_and_keeps_nothing_half_written(demo):
    store, run = demo
    job = mw.MapsJob(store, run).start()
    lease = mw.lease_name(run.id, "umap", 0)
    assert wait_until(lambda: db.get_marker(store, lease) is not None, 120), "the child never took its lease"
    pid = job._proc.pid
    t0 = time.monotonic()
    job.cancel()
    assert job.wait(10)
    assert time.monotonic() - t0 < 2.0  # terminated, not waited for
    assert job.outcome == mw.MapsOutcome("cancelled") and job.cancelled
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert db.get_marker(store, lease) is None  # given back on SIGTERM
    for p in db.list_projections(store, run.id):  # whatever it stored is whole
        assert db.load_projection(store, p.id).coords.shape == (96, 2)


def test_a_second_job_on_the_same_maps_leaves_them_to_the_first(demo):
    """Another process (here: this test) holds the lease: the child refuses, saying who computes them."""
    store, run = demo
    lease = mw.lease_name(run.id, "umap", 0)
    db.take_lease(store, lease, "otherhost pid 1 #x", "UMAP maps of index", run.id)
    job = mw.MapsJob(store, run).start()
    assert job.wait(300)
    assert job.outcome.status == "elsewhere" and "already running in another process" in job.outcome.error
    assert mw.maps_progress(store, run, "umap") == (0, 13)


def test_the_child_ends_with_the_process_that_started_it(demo, tmp_path: Path):
    """A server killed with SIGKILL takes its maps child with it (nothing computes unwatched; the next start
    resumes)."""
    store, run = demo
    pid_file = tmp_path / "child.pid"
    script = textwrap.dedent(f"""
        import time, db
        from services.workflows.maps import MapsJob
        store = db.open_store({store.engine.url.render_as_string(hide_password=False)!r})
        run = db.get_embedding_run(store, {run.id})
        job = MapsJob(store, run).start()
        open({str(pid_file)!r}, "w").write(str(job._proc.pid))
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    try:
        assert wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 120)
        child = int(pid_file.read_text())
        assert wait_until(lambda: db.get_marker(store, mw.lease_name(run.id, "umap", 0)) is not None, 120)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)

        def gone() -> bool:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                return True
            with open(f"/proc/{child}/stat") as f:  # a zombie (not reaped yet) has ended too
                return f.read().split()[2] == "Z"

        assert wait_until(gone, 10), "the maps child outlived the process that started it"
    finally:
        if parent.poll() is None:
            parent.kill()
