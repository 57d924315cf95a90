"""Stored indexes in Milvus: build a run's collections from the store (resumable, only changed documents
written), open them for search, drop them with their index or corpus. No Streamlit here.

What lives where: the SQL store stays the source of truth for documents, labels, runs *and vectors* (an index's
standard and head vectors stay in ``embedding_vectors``). Milvus holds a search copy, rebuilt from SQL without
embedding anything again; Maps (projections), head importance and the incremental update read the SQL copy.
The serving processes (app, CLI) then search without loading the vectors: they hold the document ids only.

A run's collections: one per view (``standard``, ``heads``, ``split``; see :mod:`mrag_core.milvus_backend`),
named ``mrag_<namespace>_r<run id>_<identity>_<flat|hnsw>_<view>``. The namespace is a random name kept in the
store (``app_markers``: ``milvus_namespace``), so two databases can share one Milvus; the identity is a hash of
the run's id and creation time (SQLite gives a deleted run's id to the next one).

:func:`sync_run_collections` writes them: it holds the lease ``milvus:<name>`` (a second process building the
same collections is refused with :class:`db.RunInProgressError`), marks each collection ``building``, deletes
the rows of documents the run no longer holds, writes in batches the documents whose stored vectors differ
from the collection's (by hash), then (HNSW) calibrates ``efSearch`` and marks the collections ``ready`` with
the run's document count. Stopped midway (an error, a kill, ``cancel``) they stay ``building``: no search
uses them, the SQL store is untouched, and the next call writes only what is still missing. A new run of the
same settings (after documents were added, edited or deleted) takes over the newest earlier run's
collections (renamed) and writes only the documents whose vectors changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import db
from mrag_core import milvus_backend as mb
from mrag_core.backends import _prepare
from mrag_core.corpus_index import SPLIT_VOTES, CorpusIndex, vote_functions
from mrag_core.extraction import split_vectors
from mrag_core.importance import HeadImportance, head_importance
from mrag_core.voting import VARIANTS
from services.heartbeat import holding_lease

log = logging.getLogger(__name__)
VIEWS = ("standard", "heads", "split")
NAMESPACE_MARKER = "milvus_namespace"
LEASE_KIND = "Milvus collections of index"
ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class SyncResult:
    """What :func:`sync_run_collections` did: ``status`` ``done``, ``cancelled`` or ``reused`` (ready already);
    ``written``: documents written (to one view or more); ``deleted``: rows deleted, summed over the views;
    ``adopted_from``: the earlier run whose collections were taken over (None: built anew or resumed)."""

    status: str
    written: int
    deleted: int
    n_docs: int
    seconds: float
    adopted_from: int | None = None


def require_config() -> mb.MilvusConfig:
    config = mb.config_from_env()
    if config is None:
        raise mb.MilvusUnavailableError(f"The milvus backends need {mb.ENV_URI}: a Milvus Lite path ending in .db "
                                        "or the http:// address of a Milvus server.")
    return config


def namespace(store: db.Store, create: bool = True) -> str | None:
    """This database's prefix in Milvus (made and kept on first use when ``create``)."""
    ns = db.get_marker(store, NAMESPACE_MARKER)
    if ns is None and create:
        db.set_marker(store, NAMESPACE_MARKER, secrets.token_hex(4))
        ns = db.get_marker(store, NAMESPACE_MARKER)
    return ns


def _identity(run: Any) -> str:
    return hashlib.sha256(db.identity_key(run).encode()).hexdigest()[:8]


def base_name(ns: str, run: Any, backend: str) -> str:
    kind = "hnsw" if mb.MILVUS_KINDS[backend] == "HNSW" else "flat"
    return f"mrag_{ns}_r{run.id}_{_identity(run)}_{kind}"


def view_layouts(run: Any) -> dict[str, mb.View]:
    return {"standard": mb.View("standard", 1, run.dim), "heads": mb.View("heads", run.n_heads, run.head_dim),
            "split": mb.View("split", run.n_heads, run.dim // run.n_heads)}


def view_vectors(standard: np.ndarray, heads: np.ndarray, n_heads: int, metric: str = "cosine"
                 ) -> dict[str, np.ndarray]:
    """Each view's packed, prepared vectors [n, width] (Split's pieces cut from the standard vector here)."""
    return {"standard": mb.pack_docs(_prepare(standard, metric)), "heads": mb.pack_docs(_prepare(heads, metric)),
            "split": mb.pack_docs(_prepare(split_vectors(standard, n_heads), metric))}


def _layout_json(run: Any, backend: str, view: mb.View) -> str:
    return json.dumps({"run": db.identity_key(run), "backend": backend, "n_spaces": view.n_spaces, "dim": view.dim,
                       "metric": "cosine"})


def collection_state(store: db.Store, run: Any, backend: str) -> str:
    """``ready``, ``building`` (some collection unfinished) or ``missing`` (none), for the pages and the CLI.
    Raises MilvusUnavailableError."""
    ns = namespace(store, create=False)
    if ns is None:
        return "missing"
    client = mb.connect(require_config())
    names = [f"{base_name(ns, run, backend)}_{v}" for v in VIEWS]
    present = [client.has_collection(n) for n in names]
    if not any(present):
        return "missing"
    if not all(present):
        return "building"
    props = [mb.properties(client, n) for n in names]
    ready = all(p.get(mb.STATE) == "ready" and p.get(mb.N_DOCS) == str(run.n_saved) for p in props)
    return "ready" if ready else "building"


def _adopt(store: db.Store, client: Any, ns: str, run: Any, backend: str, names: dict[str, str]) -> int | None:
    """Rename the collections of the newest earlier run of the same settings to ``names`` (its vectors are mostly
    this run's: only the changed documents are then written); returns that run's id, or None."""
    for earlier_id in db.reuse_candidates(store, run.id):
        if earlier_id > run.id:
            continue  # a newer run's collections stay its own
        try:
            earlier = db.get_embedding_run(store, earlier_id)
        except db.NotFoundError:
            continue
        old = {v: f"{base_name(ns, earlier, backend)}_{v}" for v in VIEWS}
        if not all(client.has_collection(n) for n in old.values()):
            continue
        owner = db.new_owner()
        lease = f"milvus:{base_name(ns, earlier, backend)}"
        try:
            db.take_lease(store, lease, owner, LEASE_KIND, earlier.id)
        except db.RunInProgressError:
            continue  # someone updates that one now
        try:
            for v in VIEWS:
                client.rename_collection(old[v], names[v])
        finally:
            db.release_lease(store, lease, owner)
        return earlier.id
    return None


def sync_run_collections(store: db.Store, run_id: int, backend: str = "milvus", *, progress: ProgressFn | None = None,
                         cancel: threading.Event | None = None, batch_size: int = mb.WRITE_BATCH,
                         target_recall: float = 0.9) -> SyncResult:
    """Build, resume or update the Milvus collections of finished run ``run_id`` (see the module docstring).
    ``progress(done, total)`` after each batch; ``cancel`` stops between batches (collections stay ``building``).
    Raises MilvusUnavailableError, db.RunInProgressError (another process builds them), ValueError (run not
    finished)."""
    t0 = time.perf_counter()
    if backend not in mb.MILVUS_KINDS:
        raise ValueError(f"'{backend}' is not a Milvus backend: use one of {', '.join(mb.MILVUS_KINDS)}")
    run = db.get_embedding_run(store, run_id)
    if run.status != "done":
        raise ValueError(f"embedding run {run_id} is not finished (status: {run.status}); build it first")
    client = mb.connect(require_config())
    ns = namespace(store)
    assert ns is not None
    base = base_name(ns, run, backend)
    names = {v: f"{base}_{v}" for v in VIEWS}
    layouts = view_layouts(run)
    cancel = cancel if cancel is not None else threading.Event()
    with holding_lease(store, f"milvus:{base}", LEASE_KIND, run.id, cancel):
        ids = np.asarray(db.embedding_document_ids(store, run.id), np.int64)
        if collection_state(store, run, backend) == "ready":
            return SyncResult("reused", 0, 0, len(ids), time.perf_counter() - t0)
        adopted = None if any(client.has_collection(n) for n in names.values()) else _adopt(
            store, client, ns, run, backend, names)
        index_type = mb.MILVUS_KINDS[backend]
        for v in VIEWS:
            building = {mb.STATE: "building", mb.N_DOCS: "", mb.LAYOUT: _layout_json(run, backend, layouts[v])}
            if client.has_collection(names[v]):
                mb.set_properties(client, names[v], building)
                mb.load_collection(client, names[v])  # a renamed (or restarted) collection comes back released
            else:
                mb.create_collection(client, names[v], [layouts[v]], index_type, building)
        held = {v: mb.stored_hashes(client, names[v]) for v in VIEWS}
        keep = set(ids.tolist())
        deleted = sum(mb.delete_ids(client, names[v], [d for d in held[v] if d not in keep]) for v in VIEWS)
        written = 0
        for start in range(0, len(ids), batch_size):
            if cancel.is_set():
                return SyncResult("cancelled", written, deleted, len(ids), time.perf_counter() - t0, adopted)
            got, std, heads = db.load_vectors(store, run.id, ids[start:start + batch_size].tolist())
            hashes = [mb.vector_hash(std[i], heads[i]) for i in range(len(got))]
            packed = view_vectors(std, heads, run.n_heads)
            changed: set[int] = set()
            for v in VIEWS:
                need = np.flatnonzero([held[v].get(int(d)) != h for d, h in zip(got, hashes)])
                if len(need):
                    mb.write_rows(client, names[v], got[need], {v: packed[v][need]}, [hashes[i] for i in need])
                    changed.update(int(d) for d in got[need])
            written += len(changed)
            if progress is not None:
                progress(min(start + batch_size, len(ids)), len(ids))
        for v in VIEWS:
            mb.settle(client, names[v], index_type)
        calibration: dict[str, str] = {v: "" for v in VIEWS}
        if index_type == "HNSW" and len(ids) >= 2:
            calibration = _calibrate(store, client, run, names, layouts, ids, target_recall)
        for v in VIEWS:
            mb.set_properties(client, names[v], {mb.STATE: "ready", mb.N_DOCS: str(len(ids)),
                                                 mb.CALIBRATION: calibration[v]})
    return SyncResult("done", written, deleted, len(ids), time.perf_counter() - t0, adopted)


def _calibrate(store: db.Store, client: Any, run: Any, names: dict[str, str], layouts: dict[str, mb.View],
               ids: np.ndarray, target: float) -> dict[str, str]:
    """HNSW ``efSearch`` per space and per vote of each view, as ``faiss-hnsw`` calibrates them (JSON per view)."""
    _, std, heads = db.load_vectors(store, run.id)
    head_imp, split_imp = run_importances(store, run, 0, std=std, heads=heads)
    views = {"standard": (std[:, None, :], {}),
             "heads": (heads, vote_functions(head_imp.score, "cosine", VARIANTS)),
             "split": (split_vectors(std, run.n_heads), vote_functions(split_imp.score, "cosine", SPLIT_VOTES))}
    out = {}
    for v, (x, votes) in views.items():
        spaces = mb.MilvusSpaces(client, names[v], layouts[v], len(ids), "cosine", "HNSW", doc_ids=ids)
        spaces.calibrate(_prepare(x, "cosine"), target, votes=votes)
        out[v] = mb.calibration_to_json(spaces.calibration, spaces.vote_calibrations)
    return out


def run_importances(store: db.Store, run: Any, seed: int = 0, *, std: np.ndarray | None = None,
                    heads: np.ndarray | None = None) -> tuple[HeadImportance, HeadImportance]:
    """(head, split) importance of a run: stored with it for seed 0 (runs built before split importance was
    stored compute it), else sampled with ``seed`` from the SQL vectors, which are read once and not kept."""
    stored = run.importance or {}
    if seed == 0 and stored.get("score") and stored.get("split"):
        return HeadImportance.from_dict(stored), HeadImportance.from_dict(stored["split"])
    if std is None or heads is None:
        _, std, heads = db.load_vectors(store, run.id)
    head = HeadImportance.from_dict(stored) if seed == 0 and stored.get("score") else head_importance(heads, seed=seed)
    return head, head_importance(split_vectors(std, run.n_heads), seed=seed)


def open_run_index(store: db.Store, run_id: int, backend: str = "milvus", seed: int = 0
                   ) -> tuple[list[int], CorpusIndex]:
    """``(document ids, CorpusIndex)`` of a finished run whose collections are ready: searches go to Milvus, this
    process holds the ids (not the vectors). Raises MilvusUnavailableError, MilvusNotReadyError."""
    run = db.get_embedding_run(store, run_id)
    client = mb.connect(require_config())
    ns = namespace(store, create=False)
    ids = np.asarray(db.embedding_document_ids(store, run.id), np.int64)
    todo = (f"build them on the Index page (search backend {backend}) or with: mrag-studio index --corpus "
            f"NAME --backend {backend}")
    if ns is None:
        raise mb.MilvusNotReadyError(f"Index #{run.id} has no Milvus collections yet: {todo}.")
    base = base_name(ns, run, backend)
    layouts = view_layouts(run)
    views = {}
    for v in VIEWS:
        name = f"{base}_{v}"
        if not client.has_collection(name):
            raise mb.MilvusNotReadyError(f"Index #{run.id} has no Milvus collections yet: {todo}.")
        props = mb.properties(client, name)
        if props.get(mb.STATE) != "ready" or props.get(mb.N_DOCS) != str(len(ids)):
            raise mb.MilvusNotReadyError(f"The Milvus collections of index #{run.id} are not ready (a build was "
                                         f"interrupted or the index changed): {todo} (it resumes).")
        mb.load_collection(client, name)  # loaded already unless the engine restarted since (then it loads it)
        cal, votes = mb.calibration_from_json(props.get(mb.CALIBRATION, ""))
        views[v] = mb.MilvusSpaces(client, name, layouts[v], len(ids), "cosine", mb.MILVUS_KINDS[backend],
                                   doc_ids=ids, calibration=cal, vote_calibrations=votes)
    head_imp, split_imp = run_importances(store, run, seed)
    index = CorpusIndex(standard=views["standard"], heads=views["heads"], split=views["split"],
                        head_importance=head_imp, split_importance=split_imp, metric="cosine", backend=backend,
                        n_docs=len(ids), n_heads=run.n_heads)
    return ids.tolist(), index


def drop_orphans(store: db.Store) -> str | None:
    """Drop this database's collections whose run is gone (deleted with its index or corpus). Returns a warning
    in words when Milvus could not be reached (they are dropped on a later call), else None. Never raises for
    Milvus."""
    try:
        config = mb.config_from_env()
        ns = namespace(store, create=False)
        if config is None or ns is None:
            return None
        client = mb.connect(config)
        live = {f"r{r.id}_{_identity(r)}" for r in db.list_embedding_runs(store)}
        prefix = f"mrag_{ns}_"
        dropped = 0
        for name in client.list_collections():
            if name.startswith(prefix) and "_".join(name[len(prefix):].split("_")[:2]) not in live:
                client.drop_collection(name)
                dropped += 1
        if dropped:
            log.info("dropped %d Milvus collections of deleted indexes", dropped)
        return None
    except mb.MilvusUnavailableError as exc:
        return f"The Milvus collections of deleted indexes were not dropped yet: {exc}"
    except Exception as exc:  # noqa: BLE001 - the SQL deletion stands; the collections go next time
        return f"The Milvus collections of deleted indexes were not dropped yet: {exc}"
