"""A background heartbeat for long work stored in the database (an index build, an evaluation run).

While the work runs, a daemon thread calls ``beat()`` every ``every`` seconds; ``beat`` stores the
heartbeat (``db.beat_eval_run`` / ``db.beat_embedding_run``) and returns whether the run is still this
process's. A beat that fails (a database busy longer than its timeout) is skipped: the next one tries
again. When ``beat`` returns ``False`` (another process claimed the run after this one had been silent
longer than ``db.LIVE_WINDOW_S``, e.g. a laptop that slept), :attr:`Heartbeat.lost` is set and
``on_lost`` is called once, e.g. to cancel the work at its next batch. :func:`holding_lease` holds a
``db`` lease (work without a run row of its own) with such a heartbeat. No Streamlit here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

log = logging.getLogger(__name__)


class Heartbeat:
    """``with Heartbeat(beat, every, on_lost):`` beats every ``every`` seconds until the block ends."""

    def __init__(self, beat: Callable[[], bool], every: float, on_lost: Callable[[], None] | None = None) -> None:
        if every <= 0:
            raise ValueError("a heartbeat interval must be positive")
        self._beat = beat
        self.every = float(every)
        self._on_lost = on_lost
        self._stop = threading.Event()
        self.lost = threading.Event()
        self.beats = 0  # stored beats, for tests and logs
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Heartbeat":
        self._thread = threading.Thread(target=self._loop, name="mrag-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.every + 5.0)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                still_ours = self._beat()
            except Exception as exc:  # noqa: BLE001 - a busy database skips one beat; the work goes on
                log.warning("heartbeat skipped: %s", exc)
                continue
            if not still_ours:
                self.lost.set()
                if self._on_lost is not None:
                    self._on_lost()
                return
            self.beats += 1


@contextmanager
def holding_lease(store: Any, name: str, kind: str, key: int, cancel: threading.Event, *,
                  title: str | None = None) -> Iterator[None]:
    """Hold the lease ``name`` (:func:`db.take_lease`) while the block runs, with a heartbeat that sets ``cancel``
    should another process take it over; given back at the end. ``kind``, ``key`` and ``title`` (the name users know
    the corpus or query set by) name the work in the refusal: ``db.liveness.LeaseHeldError`` (a
    ``db.RunInProgressError``), raised before the block when another process holds the lease, e.g. "Pre-annotation
    of corpus 'Space mix' (#3) is already running in another process (...; started ...)"."""
    import db

    owner = db.new_owner()
    db.take_lease(store, name, owner, kind, key, title=title)
    try:
        with Heartbeat(lambda: db.beat_lease(store, name, owner), db.BEAT_EVERY_S, on_lost=cancel.set):
            yield
    finally:
        db.release_lease(store, name, owner)
