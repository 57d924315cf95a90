"""The stored 2-D maps of an index (one per space, method and seed): fitted once by :mod:`mrag_core.projection` and
kept in the store (``db.save_projection``), read back with their reducer so a query can be placed.

The maths (PCA/UMAP fits, the arrays-only reducers, placing a query) is the engine's :mod:`mrag_core.projection`;
this module reads and writes the store.
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

import db
from mrag_core import projection
from mrag_core.extraction import Embeddings
from mrag_core.projection import SpaceMap, stored_reducer

__all__ = ["ensure_maps", "forget_maps_without_model", "list_projections", "load_or_fit"]


def load_or_fit(store: db.Store, run_id: int, space: str, method: str, *, emb: Embeddings | None = None,
                doc_ids: Sequence[int] | None = None, seed: int = 0) -> SpaceMap:
    """The stored projection of (run, space, method, seed) or a new one fitted and stored.
    ``emb``/``doc_ids`` (the run's vectors) are loaded when not given."""
    found = db.find_projection(store, run_id, space, method, seed=seed)
    if found is not None:
        reducer, missing = stored_reducer(found.model_blob)
        return SpaceMap(space, method, found.doc_ids, found.coords, reducer, True, missing)
    if emb is None or doc_ids is None:
        ids, std, heads = db.load_vectors(store, run_id)
        emb, doc_ids = Embeddings(std, heads), [int(i) for i in ids]
    params = projection.default_params(method, len(doc_ids))
    coords, reducer = projection.fit_projection(projection.space_vectors(emb, space), method, seed=seed, params=params)
    blob: bytes | None = reducer.dumps()
    if len(blob) > store.largest_value_bytes():  # e.g. a UMAP model of 10,000 384-d vectors (38 MB) on MariaDB
        # Stored without its model, the map places no query: not now either, so it acts the same after a restart.
        blob, kept = None, None
    else:
        kept = reducer
    db.save_projection(store, run_id, space, method, coords, list(doc_ids), params=params, seed=seed,
                       model_blob=blob)
    return SpaceMap(space, method, [int(d) for d in doc_ids], coords, kept, False,
                    None if kept is not None else "too_large")


def forget_maps_without_model(store: db.Store, run_id: int, method: str, *, seed: int = 0,
                              spaces: Sequence[str] | None = None) -> list[str]:
    """Delete the stored maps of (run, method, seed) that place no query: stored without their fitted model (it
    was larger than the database takes in one value), or with one this version does not load (an older version's
    pickle, or an unreadable blob), all or those of ``spaces``, so that :func:`ensure_maps` fits them again, e.g.
    after MySQL's ``max_allowed_packet`` was raised. Returns the spaces whose maps were deleted."""
    wanted = set(spaces) if spaces is not None else None
    gone: list[str] = []
    for p in db.list_projections(store, run_id):
        if p.method != method or p.seed != seed or (wanted is not None and p.space not in wanted):
            continue
        if not p.has_model or stored_reducer(db.load_projection(store, p.id).model_blob)[0] is None:
            db.delete_projection(store, p.id)
            gone.append(p.space)
    return gone


def ensure_maps(store: db.Store, run_id: int, method: str = "pca", *, spaces: Sequence[str] | None = None,
                seed: int = 0, progress: Callable[[int, int], None] | None = None,
                cancel: threading.Event | None = None) -> dict[str, SpaceMap]:
    """Maps of all (or the given) spaces of a run, computing only those not stored yet.
    ``progress(done, total)`` after each space; ``cancel`` stops between spaces (stored ones stay)."""
    run = db.get_embedding_run(store, run_id)
    names = list(spaces) if spaces is not None else projection.space_names(run.n_heads)
    emb: Embeddings | None = None
    ids: list[int] | None = None
    out: dict[str, SpaceMap] = {}
    for i, space in enumerate(names):
        if cancel is not None and cancel.is_set():
            break
        if emb is None and db.find_projection(store, run_id, space, method, seed=seed) is None:
            raw_ids, std, heads = db.load_vectors(store, run_id)
            emb, ids = Embeddings(std, heads), [int(x) for x in raw_ids]
        out[space] = load_or_fit(store, run_id, space, method, emb=emb, doc_ids=ids, seed=seed)
        if progress is not None:
            progress(i + 1, len(names))
    return out


# --------------------------------------------------------------------------- the store, for the pages


def list_projections(store: db.Store, run_id: int) -> list[db.ProjectionInfo]:
    """The stored maps of an index (space, method, seed, whether each has its model) (:func:`db.list_projections`)."""
    return db.list_projections(store, run_id)
