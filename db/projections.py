"""2-D projections (UMAP/PCA) of one embedding space of a run: save, find, load, delete.

Contract: ``coords`` is float32 ``[n, 2]`` in the order of ``doc_ids``. ``model_blob`` is an
opaque byte string (the caller's fitted reducer, to place queries later: arrays in ``.npz``, see
:mod:`mrag_core.projection`); the store never interprets it. Nothing read from the database is
ever unpickled: anyone who can write to a shared database could otherwise run code in the app.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import delete, select

from db._common import require, to_jsonable
from db.engine import Store
from db.errors import InvalidInputError
from db.models import EmbeddingRun, Projection

METHODS = ("umap", "pca")
_F32 = np.dtype("<f4")


@dataclass(frozen=True)
class ProjectionInfo:
    """Projection metadata (no arrays)."""

    id: int
    run_id: int
    space: str
    method: str
    params: dict[str, Any]
    seed: int | None
    n_points: int
    has_model: bool
    created_at: datetime


@dataclass(frozen=True)
class ProjectionData:
    """A projection with its coordinates (``coords[i]`` belongs to ``doc_ids[i]``)."""

    info: ProjectionInfo
    doc_ids: list[int]
    coords: np.ndarray
    model_blob: bytes | None


def _info(p: Projection) -> ProjectionInfo:
    return ProjectionInfo(
        id=p.id,
        run_id=p.run_id,
        space=p.space,
        method=p.method,
        params=dict(p.params or {}),
        seed=p.seed,
        n_points=len(p.doc_ids or []),
        has_model=p.model_blob is not None,
        created_at=p.created_at,
    )


def _data(p: Projection) -> ProjectionData:
    ids = [int(i) for i in p.doc_ids]
    coords = np.frombuffer(bytearray(p.coords), dtype=_F32).reshape(len(ids), 2)
    return ProjectionData(info=_info(p), doc_ids=ids, coords=coords, model_blob=p.model_blob)


def save_projection(
    store: Store,
    run_id: int,
    space: str,
    method: str,
    coords: np.ndarray,
    doc_ids: Sequence[int],
    *,
    params: Mapping[str, Any] | None = None,
    seed: int | None = None,
    model_blob: bytes | None = None,
) -> ProjectionInfo:
    """Store a projection of ``space`` (``"standard"`` or ``"head:<i>"``) of a run.
    Raises NotFoundError (run), InvalidInputError (method, shape, space)."""
    if method not in METHODS:
        raise InvalidInputError(f"Projection method must be one of {METHODS}, not {method!r}.")
    ids = [int(i) for i in doc_ids]
    arr = np.ascontiguousarray(coords, dtype=_F32)
    if arr.shape != (len(ids), 2):
        raise InvalidInputError(f"coords have shape {arr.shape}, expected ({len(ids)}, 2).")
    with store.session() as session:
        run = require(session, EmbeddingRun, run_id, "Embedding run")
        if space != "standard":
            head = space.removeprefix("head:")
            if not space.startswith("head:") or not head.isdigit() or int(head) >= run.n_heads:
                raise InvalidInputError(
                    f"Space must be 'standard' or 'head:<0..{run.n_heads - 1}>', not {space!r}."
                )
        projection = Projection(
            run_id=run_id,
            space=space,
            method=method,
            params=to_jsonable(dict(params or {})),
            seed=seed,
            coords=arr.tobytes(),
            doc_ids=ids,
            model_blob=model_blob,
        )
        session.add(projection)
        session.flush()
        return _info(projection)


def load_projection(store: Store, projection_id: int) -> ProjectionData:
    """A projection with its arrays. Raises NotFoundError."""
    with store.session(readonly=True) as session:
        return _data(require(session, Projection, projection_id, "Projection"))


def find_projection(
    store: Store,
    run_id: int,
    space: str,
    method: str,
    *,
    params: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> ProjectionData | None:
    """The newest projection of this run/space/method, also matching ``params`` (equal as
    JSON) and ``seed`` when they are given; None if there is none."""
    wanted = to_jsonable(dict(params)) if params is not None else None
    with store.session(readonly=True) as session:
        stmt = (
            select(Projection)
            .where(Projection.run_id == run_id, Projection.space == space, Projection.method == method)
            .order_by(Projection.id.desc())
        )
        if seed is not None:
            stmt = stmt.where(Projection.seed == seed)
        for p in session.scalars(stmt):
            if wanted is None or dict(p.params or {}) == wanted:
                return _data(p)
    return None


def list_projections(store: Store, run_id: int) -> list[ProjectionInfo]:
    """Projections of a run, newest first (metadata only)."""
    with store.session(readonly=True) as session:
        rows = session.scalars(
            select(Projection).where(Projection.run_id == run_id).order_by(Projection.id.desc())
        )
        return [_info(p) for p in rows]


def delete_projection(store: Store, projection_id: int) -> None:
    """Delete one projection. Raises NotFoundError."""
    with store.session() as session:
        require(session, Projection, projection_id, "Projection")
        session.execute(delete(Projection).where(Projection.id == projection_id))
