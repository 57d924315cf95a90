"""Maps of an index computed in the background, in a child process; the demo index's UMAP maps computed once,
when it is built.

UMAP's first fit in a process JIT-compiles numba code (about 30 s of one core, holding the GIL for long
stretches): in the app's own process that would stall every session. A :class:`MapsJob` runs
:func:`services.maps.ensure_maps` in a child process (``python -m services.workflows.maps``) at a lower CPU
priority, on the same database. Each map is stored as it is fitted (one transaction each), so the job's progress
is what the database holds (:func:`maps_progress`), and a job stopped for any reason (Cancel terminates the child
at once; a server that stops takes its child with it) keeps the maps it stored: the next job computes only the
others. The child holds the lease ``maps:<index>:<method>:<seed>`` (``db.take_lease``, with a heartbeat), so two
servers on one database never fit the same maps at once; a child killed in compiled code (Cancel waits half a
second for it to stop by itself) has its lease given back by the job.

The demo: once the demo corpus' index is built in the app, :func:`want_demo_maps` records in the marker
``demo_maps`` which index (its :func:`db.identity_key`) wants its UMAP maps; :func:`pending_demo_maps` names that
index while any of its maps is missing, so that the app's next start finishes what a stopped one began. The marker
is cleared once all are stored, or when the user cancels (:func:`drop_demo_maps`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import db
from services.demo.store import demo_corpus_id

#: ``db`` marker holding the identity of the demo index whose UMAP maps are wanted.
DEMO_MAPS_MARKER = "demo_maps"
#: What Maps opens on: the maps computed for the demo index.
DEMO_METHOD = "umap"
DEMO_SEED = 0
#: The child's CPU priority (``nice``): interactive work in the app goes first.
CHILD_NICE = 10
#: Exit status of a child that found another process computing the same maps.
HELD_ELSEWHERE = 3
#: After a job found another process computing its maps: how long before trying again (that process may have
#: stopped; its lease then expires).
RETRY_ELSEWHERE_S = db.LIVE_WINDOW_S


def index_identity(run: db.EmbeddingRunInfo) -> str:
    """An index's identity (:func:`db.identity_key`: its id and creation time; SQLite gives a deleted index's id
    to the next one)."""
    return db.identity_key(run)


def lease_name(run_id: int, method: str, seed: int) -> str:
    """The lease a child holds while it computes these maps."""
    return f"maps:{run_id}:{method}:{seed}"


def missing_maps(store: db.Store, run: db.EmbeddingRunInfo, method: str, seed: int = 0) -> list[str]:
    """The spaces of ``run`` (``standard``, ``head:0``, ...) without a stored map of ``method`` and ``seed``."""
    from mrag_core.projection import space_names  # (imports torch: not before it is needed)

    stored = {p.space for p in db.list_projections(store, run.id) if p.method == method and p.seed == seed}
    return [s for s in space_names(run.n_heads) if s not in stored]


def maps_progress(store: db.Store, run: db.EmbeddingRunInfo, method: str, seed: int = 0) -> tuple[int, int]:
    """``(stored, total)``: how many of ``run``'s maps of ``method`` and ``seed`` are stored, out of all its spaces."""
    total = run.n_heads + 1
    return total - len(missing_maps(store, run, method, seed)), total


def want_demo_maps(store: db.Store, run: db.EmbeddingRunInfo) -> bool:
    """Record that the demo index ``run`` (just built) wants its UMAP maps; False (nothing recorded) when ``run``
    is not a finished index of the demo corpus of at least three documents, or its maps are all stored."""
    if run.status != "done" or run.n_saved < 3 or run.corpus_id != demo_corpus_id(store):
        return False
    if not missing_maps(store, run, DEMO_METHOD, DEMO_SEED):
        return False
    db.set_marker(store, DEMO_MAPS_MARKER, db.identity_key(run))
    return True


def pending_demo_maps(store: db.Store) -> db.EmbeddingRunInfo | None:
    """The demo index whose UMAP maps are wanted and not all stored yet, or None (the marker is cleared when its
    index is gone or its maps are all stored)."""
    marked = db.get_marker(store, DEMO_MAPS_MARKER)
    if not marked:
        return None
    head = marked.split("@", 1)[0]
    try:
        run = db.get_embedding_run(store, int(head))
    except (db.NotFoundError, ValueError):
        run = None
    if run is None or db.identity_key(run) != marked:
        db.clear_marker(store, DEMO_MAPS_MARKER)
        return None
    if run.status != "done":
        return None
    if not missing_maps(store, run, DEMO_METHOD, DEMO_SEED):
        db.clear_marker(store, DEMO_MAPS_MARKER)
        return None
    return run


def drop_demo_maps(store: db.Store, identity: str) -> bool:
    """The user cancelled the maps of index ``identity``: when they are the demo's, a later start does not compute
    them again unasked. True when the marker named that index."""
    if db.get_marker(store, DEMO_MAPS_MARKER) != identity:
        return False
    return db.clear_marker(store, DEMO_MAPS_MARKER)


def _store_url(store: db.Store) -> str:
    """The store's full URL (password included), handed to the child in its environment, never on its command
    line (which ``ps`` shows)."""
    return store.engine.url.render_as_string(hide_password=False)


@dataclass
class MapsOutcome:
    """How a :class:`MapsJob` ended: ``status`` ``done``, ``cancelled``, ``elsewhere`` (another process holds
    the lease: it computes them) or ``failed`` (``error``: the child's last lines)."""

    status: str
    error: str = ""


class MapsJob:
    """The maps of one index (``method``, ``seed``) computed by a child process, observable and cancellable.

    :meth:`start` returns at once; :attr:`finished` and :attr:`outcome` tell when and how it ended;
    :meth:`cancel` terminates the child (within a second) and keeps the maps already stored."""

    def __init__(self, store: db.Store, run: db.EmbeddingRunInfo, method: str = DEMO_METHOD,
                 seed: int = DEMO_SEED) -> None:
        from mrag_core.projection import METHODS

        if method not in METHODS:
            raise ValueError(f"unknown projection method '{method}': use one of {', '.join(METHODS)}")
        self.store = store
        self.run = run
        self.identity = db.identity_key(run)
        self.method = method
        self.seed = int(seed)
        self.started = time.time()
        self.ended: float | None = None
        self.outcome: MapsOutcome | None = None
        self._cancelled = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._work, name=f"mrag-maps-{run.id}-{method}", daemon=True)

    def start(self) -> "MapsJob":
        self._thread.start()
        self._ready.wait(30)
        return self

    def _work(self) -> None:
        env = {**os.environ, "MRAG_DATABASE_URL": _store_url(self.store), "MRAG_MAPS_PARENT": str(os.getpid())}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "services.workflows.maps", str(self.run.id), self.identity, self.method,
                 str(self.seed)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as exc:
            self.ended = time.time()
            self.outcome = MapsOutcome("failed", str(exc))
            return
        finally:
            self._ready.set()
        if self._cancelled.is_set():
            self._stop_child()
        out, err = self._proc.communicate()
        code = self._proc.returncode
        owner = (out or "").splitlines()[:1]
        if owner:  # a child killed before it could give its lease back: given back here
            try:
                db.release_lease(self.store, lease_name(self.run.id, self.method, self.seed), owner[0])
            except db.StoreError:
                pass  # it expires within db.LIVE_WINDOW_S
        last = (err or "").strip().splitlines()
        self.ended = time.time()
        if self._cancelled.is_set():
            self.outcome = MapsOutcome("cancelled")
        elif code == 0:
            self.outcome = MapsOutcome("done")
        elif code == HELD_ELSEWHERE:
            self.outcome = MapsOutcome("elsewhere", last[-1] if last else "")
        else:
            self.outcome = MapsOutcome("failed", "\n".join(last[-3:]) or f"the maps process ended with status {code}")

    def _stop_child(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()  # the child exits between two Python steps (its stored maps stay)
        try:
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            proc.kill()  # busy in compiled code: killed (its lease is given back by _work)

    def cancel(self) -> None:
        """Stop the child now; the maps it stored stay."""
        self._cancelled.set()
        self._ready.wait(30)
        self._stop_child()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def finished(self) -> bool:
        return self.outcome is not None and not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return self.finished

    def progress(self) -> tuple[int, int]:
        """``(stored, total)`` maps of this job's index, method and seed (:func:`maps_progress`)."""
        return maps_progress(self.store, self.run, self.method, self.seed)


def _die_with_parent(parent: int) -> None:
    """Ask Linux to terminate this process when the process that started it ends (a server stopped, even by
    ``kill -9``); then check that it had not ended already. Elsewhere nothing is asked."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent and os.getppid() != parent:
        raise SystemExit(1)


def _child(argv: list[str]) -> int:
    """The child: compute and store the missing maps of index ``argv[0]`` (identity ``argv[1]``), method
    ``argv[2]``, seed ``argv[3]``, on ``$MRAG_DATABASE_URL``, holding the lease, whose owner it prints first
    (its parent gives the lease back should the child be killed). Terminated, it gives the lease back itself."""
    run_id, identity, method, seed = int(argv[0]), argv[1], argv[2], int(argv[3])
    _die_with_parent(int(os.environ.get("MRAG_MAPS_PARENT", "0") or 0))

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        os.nice(CHILD_NICE)
    except OSError:
        pass
    from services.heartbeat import Heartbeat
    from services.maps import ensure_maps

    store = db.open_store()
    try:
        run = db.get_embedding_run(store, run_id)
        if db.identity_key(run) != identity:
            print(f"index #{run_id} is not the index the maps were asked for (it was deleted)", file=sys.stderr)
            return 2
        cancel = threading.Event()
        name, owner = lease_name(run_id, method, seed), db.new_owner()
        print(owner, flush=True)
        try:
            db.take_lease(store, name, owner, f"{method.upper()} maps of index", run_id)
        except db.RunInProgressError as exc:
            print(str(exc), file=sys.stderr)
            return HELD_ELSEWHERE
        try:
            with Heartbeat(lambda: db.beat_lease(store, name, owner), db.BEAT_EVERY_S, on_lost=cancel.set):
                ensure_maps(store, run_id, method, seed=seed, cancel=cancel)
        finally:
            db.release_lease(store, name, owner)
        return 0
    finally:
        store.close()


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
