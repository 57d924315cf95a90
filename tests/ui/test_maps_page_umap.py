"""Maps opens on UMAP once an index's UMAP maps are all stored, else on PCA; while the demo index's UMAP maps are
computed in the background it says so with their progress, and Cancel stops them for good; a start of the app that
finds them wanted and unfinished starts them again (AppTest on a copy of the demo index).

The UMAP maps that make a map set complete are fitted here with PCA under the UMAP name (the page's flow is tested,
not the fit: tests/mrag_core/test_projection.py); the background jobs run real children and are cancelled.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from mrag_core import projection
from services import maps as map_store
from services.demo.store import demo_corpus_id
from services.workflows import maps as mw

ROOT = Path(__file__).resolve().parents[2]
MAPS_PAGE = str(ROOT / "pages" / "7_Maps.py")

pytestmark = pytest.mark.usefixtures("demo_indexed")  # tests/ui/conftest.py


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(elements) -> list[str]:  # noqa: ANN001
    return [str(e.value) for e in elements]


@pytest.fixture
def demo_run(demo_indexed):
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    run = db.list_embedding_runs(store, demo_corpus_id(store), status="done")[0]
    yield store, run
    from ui.background import maps_jobs

    for job in list(maps_jobs().values()):
        job.cancel()
        job.wait(10)
    maps_jobs().clear()
    store.close()


def store_umap_maps(store: db.Store, run: db.EmbeddingRunInfo, spaces=None) -> None:  # noqa: ANN001
    real_fit = projection.fit_projection
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(projection, "fit_projection", lambda vectors, method="pca", **kw: real_fit(vectors, "pca", **kw))
        map_store.ensure_maps(store, run.id, "umap", spaces=spaces)


def test_maps_opens_on_umap_when_its_umap_maps_are_stored_and_keeps_a_pca_choice(demo_run):
    store, run = demo_run
    at = ok(AppTest.from_file(MAPS_PAGE, default_timeout=120).run())
    assert at.selectbox(key="maps_method").value == "pca"  # no UMAP map yet
    store_umap_maps(store, run, spaces=["standard", "head:0"])
    ok(at.run())
    assert at.selectbox(key="maps_method").value == "pca"  # 2 of 13: not yet
    store_umap_maps(store, run)
    ok(at.run())
    assert at.selectbox(key="maps_method").value == "umap" and len(at.get("plotly_chart")) == 1
    assert not at.get("progress") and not [i for i in texts(at.info) if "not computed yet" in i]
    ok(at.selectbox(key="maps_method").set_value("pca").run())
    ok(at.run())
    assert at.selectbox(key="maps_method").value == "pca"  # the user's choice stays
    fresh = ok(AppTest.from_file(MAPS_PAGE, default_timeout=120).run())  # another session opens on UMAP
    assert fresh.selectbox(key="maps_method").value == "umap"


def test_while_the_demo_maps_are_computed_maps_shows_pca_and_their_progress_and_cancel_forgets_them(demo_run):
    from ui.background import maps_job, start_maps

    store, run = demo_run
    assert mw.want_demo_maps(store, run)
    job = start_maps(store, run, "umap", 0)
    at = ok(AppTest.from_file(MAPS_PAGE, default_timeout=120).run())
    assert at.selectbox(key="maps_method").value == "pca"
    (bar,) = at.get("progress")
    assert f"UMAP maps of index #{run.id} are being computed in the background: " in bar.proto.text
    assert "PCA maps are shown meanwhile; the page switches to UMAP when they are done" in bar.proto.text
    assert len(at.get("plotly_chart")) == 1 and len(at.dataframe[-1].value) == 96  # the PCA maps, drawn
    ok(at.button(key="maps_cancel").click().run())
    assert job.wait(2.0) and job.outcome.status == "cancelled"
    assert mw.pending_demo_maps(store) is None  # a later start does not compute them again unasked
    ok(at.run())
    assert not at.get("progress") and at.selectbox(key="maps_method").value == "pca"
    assert maps_job(run, "umap", 0) is job


def test_a_start_finds_the_demo_maps_wanted_and_unfinished_and_starts_them(demo_run):
    """The app stopped while the demo maps were computed (5 of 13 stored, the marker still set): its next start
    (the first run of app.py) starts a job that computes the rest."""
    from ui.background import maps_job

    store, run = demo_run
    assert mw.want_demo_maps(store, run)
    store_umap_maps(store, run, spaces=["standard", "head:0", "head:1", "head:2", "head:3"])
    assert maps_job(run, "umap", 0) is None
    ok(AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run())
    job = maps_job(run, "umap", 0)
    assert job is not None and not job.finished and job.progress() == (5, 13)
    assert mw.missing_maps(store, run, "umap") == [f"head:{h}" for h in range(4, 12)]


def test_an_index_built_elsewhere_gets_no_background_maps(demo_run):
    """The demo index copied here was built outside the app (no wish recorded): a start computes nothing."""
    from ui.background import maps_job

    store, run = demo_run
    ok(AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run())
    assert maps_job(run, "umap", 0) is None and mw.pending_demo_maps(store) is None
