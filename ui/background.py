"""Work the app does in the background, started by its first script run (:func:`start_background_work`, called
by :func:`ui.navigation.run_page` on every run, cheap after the first; the default model is warmed just before, by
:func:`ui.model_cache.warm_default_model`):

* the demo index's UMAP maps: once an index of the demo corpus is built in the app
  (:func:`demo_index_built`, called when the Index page's build of it finishes), its maps are computed by a
  background :class:`~services.workflows.maps.MapsJob`, so that Maps opens on UMAP; a start that finds them
  wanted and unfinished (the app stopped midway) finishes them.

Maps jobs of any index (the Maps page's "Compute UMAP maps") are kept in :func:`maps_jobs`, one per (index
identity, method, seed), shared by every session of the server.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from services.workflows import maps as mw
from ui.state import build_jobs, get_store

log = logging.getLogger(__name__)

#: How often (seconds) a script run may look in the database for demo maps to compute.
CHECK_EVERY_S = 5.0


@dataclass
class _Background:
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_check: float = float("-inf")
    noted: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary)  # finished build -> maps?


@st.cache_resource(show_spinner=False)
def _background() -> _Background:
    return _Background()


@st.cache_resource(show_spinner=False)
def maps_jobs() -> dict[tuple[str, str, int], mw.MapsJob]:
    """The server's maps jobs by (index identity, method, seed)."""
    return {}


def maps_job(run: Any, method: str, seed: int) -> mw.MapsJob | None:
    """The job computing (or that computed) the maps of index ``run`` in this server, if any."""
    return maps_jobs().get((mw.index_identity(run), method, int(seed)))


def start_maps(store: Any, run: Any, method: str, seed: int) -> mw.MapsJob:
    """The running job for the maps of index ``run``, or a new one started now."""
    jobs = maps_jobs()
    key = (mw.index_identity(run), method, int(seed))
    with _background().lock:
        job = jobs.get(key)
        if job is None or job.finished:
            job = jobs[key] = mw.MapsJob(store, run, method, seed).start()
    return job


def cancel_maps(job: mw.MapsJob) -> None:
    """Stop a maps job now (the maps it stored stay); for the demo's maps, a later start does not compute them again
    unasked (the Maps page's "Compute UMAP maps" still does)."""
    job.cancel()
    mw.drop_demo_maps(job.store, job.identity)


def build_finished(store: Any, job: Any) -> bool:
    """An index build of this server (a ``BuildJob``) finished: when it built the demo's index, that index's UMAP
    maps are wanted and started, once per build however often this is called; True (each time) when they were."""
    bg = _background()
    with bg.lock:
        if job in bg.noted:
            return bg.noted[job]
        result = job.result
        wanted = bool(result is not None and result.status == "done" and mw.want_demo_maps(store, result.run))
        bg.noted[job] = wanted
    if wanted:
        start_maps(store, result.run, mw.DEMO_METHOD, mw.DEMO_SEED)
    return wanted


def _finished_demo_builds(store: Any) -> None:
    """Builds of this server that finished since the last look (whether or not the Index page showed them)."""
    for job in list(build_jobs().values()):
        if job.finished:
            build_finished(store, job)


def _check_demo_maps() -> None:
    store = get_store()
    _finished_demo_builds(store)
    run = mw.pending_demo_maps(store)
    if run is None:
        return
    job = maps_job(run, mw.DEMO_METHOD, mw.DEMO_SEED)
    if job is not None:
        if not job.finished or job.outcome.status in ("cancelled", "failed"):
            return  # running; or cancelled or failed here: not started again unasked
        if job.outcome.status == "elsewhere" and time.time() - (job.ended or 0) < mw.RETRY_ELSEWHERE_S:
            return  # another process computes them
    start_maps(store, run, mw.DEMO_METHOD, mw.DEMO_SEED)


def start_background_work() -> None:
    """At most every :data:`CHECK_EVERY_S`: start the demo maps when they are wanted and nothing computes them.
    Never fails a page: a problem is logged."""
    bg = _background()
    now = time.monotonic()
    with bg.lock:
        check = now - bg.last_check >= CHECK_EVERY_S
        if check:
            bg.last_check = now
    if check:
        try:
            _check_demo_maps()
        except Exception as exc:  # noqa: BLE001 - the page itself reports store problems
            log.warning("demo maps not started: %s", exc)
