"""Embedding runs and their per-document vectors (standard + per-head), resumable by batch.

Storage contract: one row per (run, document); ``standard`` is the little-endian float32
bytes of a ``[dim]`` vector, ``heads`` of a ``[n_heads, head_dim]`` matrix (row-major).
Shapes live in the run row. A run is *stale* when its ``corpus_version`` differs from the
corpus' current ``version`` (documents were added, edited or deleted since).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from db._common import require, to_jsonable
from db.engine import Store
from db.errors import InvalidInputError, NotFoundError, StoreError
from db.liveness import LiveRun, beat, claim_row, clear_stop_row, owns, request_stop, stop_requested
from db.models import Corpus, Document, EmbeddingRun, EmbeddingVector, utcnow

RUN_STATUSES = ("running", "done", "cancelled", "failed")
#: Dtypes of the model's weights during a run (``EmbeddingRun.precision``).
PRECISIONS = ("float32", "float16", "bfloat16")
_F32 = np.dtype("<f4")
#: Two runs' vectors are interchangeable (one may copy the other's, :func:`copy_unchanged_vectors`) when the
#: runs agree on all of these; :func:`reuse_candidates` finds such runs.
INTERCHANGEABLE_IF_SAME = ("corpus_id", "model_name", "model_path", "layer", "pooling", "precision", "n_heads",
                           "head_dim", "dim")


@dataclass(frozen=True)
class EmbeddingRunInfo(LiveRun):
    """An embedding run; ``n_saved`` is how many documents have vectors stored."""

    id: int
    corpus_id: int
    corpus_version: int
    model_name: str
    model_path: str
    layer: int
    pooling: str
    precision: str
    n_docs: int
    n_heads: int
    head_dim: int
    dim: int
    status: str
    timings: dict[str, Any]
    importance: dict[str, Any] | None
    error: str
    created_at: datetime
    finished_at: datetime | None
    n_saved: int
    owner: str = ""
    heartbeat_at: datetime | None = None


def _info(session: Session, run: EmbeddingRun) -> EmbeddingRunInfo:
    n_saved = session.scalar(select(func.count()).where(EmbeddingVector.run_id == run.id)) or 0
    return EmbeddingRunInfo(
        id=run.id,
        corpus_id=run.corpus_id,
        corpus_version=run.corpus_version,
        model_name=run.model_name,
        model_path=run.model_path,
        layer=run.layer,
        pooling=run.pooling,
        precision=run.precision,
        n_docs=run.n_docs,
        n_heads=run.n_heads,
        head_dim=run.head_dim,
        dim=run.dim,
        status=run.status,
        timings=dict(run.timings or {}),
        importance=dict(run.importance) if run.importance is not None else None,
        error=run.error,
        created_at=run.created_at,
        finished_at=run.finished_at,
        n_saved=n_saved,
        owner=run.owner or "",
        heartbeat_at=run.heartbeat_at,
    )


def _check_status(status: str) -> str:
    if status not in RUN_STATUSES:
        raise InvalidInputError(f"Run status must be one of {RUN_STATUSES}, not {status!r}.")
    return status


def create_embedding_run(
    store: Store,
    corpus_id: int,
    *,
    model_name: str,
    layer: int,
    pooling: str,
    n_heads: int,
    head_dim: int,
    dim: int,
    model_path: str = "",
    n_docs: int | None = None,
    precision: str = "float32",
    owner: str = "",
) -> EmbeddingRunInfo:
    """Start a run (status ``running``) over the corpus at its current version.
    ``n_docs`` defaults to the corpus' document count; ``precision`` is the weights' dtype
    (one of :data:`PRECISIONS`); ``owner`` (:func:`db.liveness.new_owner`) claims it for the
    calling process, with a first heartbeat. Raises NotFoundError, InvalidInputError (non-positive sizes,
    unknown precision)."""
    if min(n_heads, head_dim, dim) <= 0:
        raise InvalidInputError("n_heads, head_dim and dim must be positive.")
    if precision not in PRECISIONS:
        raise InvalidInputError(f"Unknown precision '{precision}': use one of {', '.join(PRECISIONS)}.")
    with store.session() as session:
        corpus = require(session, Corpus, corpus_id, "Corpus")
        if n_docs is None:
            n_docs = session.scalar(select(func.count()).where(Document.corpus_id == corpus_id)) or 0
        run = EmbeddingRun(
            corpus_id=corpus_id,
            corpus_version=corpus.version,
            model_name=model_name,
            model_path=model_path,
            layer=int(layer),
            pooling=pooling,
            precision=precision,
            n_docs=int(n_docs),
            n_heads=int(n_heads),
            head_dim=int(head_dim),
            dim=int(dim),
            status="running",
            timings={},
            owner=owner,
            heartbeat_at=utcnow() if owner else None,
        )
        session.add(run)
        session.flush()
        clear_stop_row(session, EmbeddingRun, run.id)  # a stop asked of a deleted run that had this id
        return _info(session, run)


def get_embedding_run(store: Store, run_id: int) -> EmbeddingRunInfo:
    """One run. Raises NotFoundError."""
    with store.session(readonly=True) as session:
        return _info(session, require(session, EmbeddingRun, run_id, "Embedding run"))


def list_embedding_runs(
    store: Store, corpus_id: int | None = None, status: str | None = None
) -> list[EmbeddingRunInfo]:
    """Runs (of one corpus, or all; with ``status``, only those in it, e.g. ``"done"``), newest first.
    Raises InvalidInputError (unknown status)."""
    with store.session(readonly=True) as session:
        stmt = select(EmbeddingRun).order_by(EmbeddingRun.id.desc())
        if corpus_id is not None:
            stmt = stmt.where(EmbeddingRun.corpus_id == corpus_id)
        if status is not None:
            stmt = stmt.where(EmbeddingRun.status == _check_status(status))
        return [_info(session, r) for r in session.scalars(stmt)]


def latest_embedding_run(
    store: Store,
    corpus_id: int,
    model_name: str,
    layer: int,
    pooling: str,
    *,
    statuses: Collection[str] | None = None,
    precision: str | None = None,
) -> EmbeddingRunInfo | None:
    """The newest run with these settings (only with a status in ``statuses`` and of ``precision``
    if given)."""
    with store.session(readonly=True) as session:
        stmt = (
            select(EmbeddingRun)
            .where(
                EmbeddingRun.corpus_id == corpus_id,
                EmbeddingRun.model_name == model_name,
                EmbeddingRun.layer == int(layer),
                EmbeddingRun.pooling == pooling,
            )
            .order_by(EmbeddingRun.id.desc())
            .limit(1)
        )
        if statuses is not None:
            stmt = stmt.where(EmbeddingRun.status.in_(list(statuses)))
        if precision is not None:
            stmt = stmt.where(EmbeddingRun.precision == precision)
        run = session.scalar(stmt)
        return _info(session, run) if run is not None else None


def is_stale(store: Store, run: EmbeddingRunInfo | int) -> bool:
    """True when the run's corpus has changed documents since the run was created.
    Raises NotFoundError."""
    run_id = run if isinstance(run, int) else run.id
    with store.session(readonly=True) as session:
        row = session.execute(
            select(EmbeddingRun.corpus_version, Corpus.version)
            .join(Corpus, Corpus.id == EmbeddingRun.corpus_id)
            .where(EmbeddingRun.id == run_id)
        ).first()
    if row is None:
        raise NotFoundError("Embedding run", run_id)
    return bool(row[0] != row[1])


def save_vectors(
    store: Store,
    run_id: int,
    doc_ids: Sequence[int],
    standard: np.ndarray,
    heads: np.ndarray,
    content_hashes: Sequence[str] | None = None,
) -> int:
    """Store one batch of vectors in one transaction (re-saving a document replaces its
    row, so a resumed batch is safe). ``standard`` is ``[n, dim]``, ``heads`` is
    ``[n, n_heads, head_dim]``; both are stored as float32. ``content_hashes``: sha256 of the
    texts the vectors were computed from (default: the documents' current ``content_hash``),
    kept so that a later run can reuse them (:func:`copy_unchanged_vectors`). Returns n.

    Raises NotFoundError (run), InvalidInputError (shapes, ids not in the run's corpus,
    duplicate ids, non-finite values, a hash count that is not n)."""
    ids = [int(i) for i in doc_ids]
    n = len(ids)
    if content_hashes is not None and len(content_hashes) != n:
        raise InvalidInputError(f"save_vectors got {len(content_hashes)} content hashes for {n} documents.")
    std = np.ascontiguousarray(standard, dtype=_F32)
    hds = np.ascontiguousarray(heads, dtype=_F32)
    if len(set(ids)) != n:
        raise InvalidInputError("save_vectors got the same document id twice.")
    with store.session() as session:
        run = require(session, EmbeddingRun, run_id, "Embedding run")
        if std.shape != (n, run.dim):
            raise InvalidInputError(
                f"standard vectors have shape {std.shape}, expected ({n}, {run.dim})."
            )
        if hds.shape != (n, run.n_heads, run.head_dim):
            raise InvalidInputError(
                f"head vectors have shape {hds.shape}, expected ({n}, {run.n_heads}, {run.head_dim})."
            )
        if not (np.isfinite(std).all() and np.isfinite(hds).all()):
            raise InvalidInputError("Vectors contain NaN or infinite values.")
        if n == 0:
            return 0
        found = {
            int(doc_id): content_hash
            for doc_id, content_hash in session.execute(
                select(Document.id, Document.content_hash).where(
                    Document.id.in_(ids), Document.corpus_id == run.corpus_id
                )
            ).all()
        }
        missing = [i for i in ids if i not in found]
        if missing:
            raise InvalidInputError(f"Document {missing[0]} is not in this run's corpus.")
        session.execute(
            delete(EmbeddingVector).where(
                EmbeddingVector.run_id == run_id, EmbeddingVector.document_id.in_(ids)
            )
        )
        session.execute(
            EmbeddingVector.__table__.insert(),
            [
                {
                    "run_id": run_id,
                    "document_id": doc_id,
                    "standard": std[i].tobytes(),
                    "heads": hds[i].tobytes(),
                    "content_hash": str(content_hashes[i]) if content_hashes is not None else found[doc_id],
                }
                for i, doc_id in enumerate(ids)
            ],
        )
    return n


def copy_unchanged_vectors(store: Store, source_run_id: int, target_run_id: int) -> int:
    """Copy into ``target_run_id`` the vectors of ``source_run_id`` whose document still has the text
    they were computed from (stored ``content_hash`` = the document's current one) and that the target
    does not hold yet, in one ``INSERT ... SELECT``. Both runs must embed the same corpus with the same
    model (name and path), layer, pooling, precision and shapes: such vectors are what the target would compute.
    Returns the number copied. Raises NotFoundError, InvalidInputError (runs that differ)."""
    with store.session() as session:
        source = require(session, EmbeddingRun, source_run_id, "Embedding run")
        target = require(session, EmbeddingRun, target_run_id, "Embedding run")
        differ = [f for f in INTERCHANGEABLE_IF_SAME if getattr(source, f) != getattr(target, f)]
        if differ:
            raise InvalidInputError(f"Runs {source_run_id} and {target_run_id} differ in {', '.join(differ)}: "
                                    "their vectors are not interchangeable.")
        if source_run_id == target_run_id:
            return 0
        v = EmbeddingVector.__table__
        held = select(v.c.document_id).where(v.c.run_id == target_run_id)
        rows = (
            select(sa.literal(target_run_id), v.c.document_id, v.c.standard, v.c.heads, v.c.content_hash)
            .join(Document, Document.id == v.c.document_id)
            .where(v.c.run_id == source_run_id, Document.corpus_id == target.corpus_id,
                   v.c.content_hash == Document.content_hash, v.c.document_id.not_in(held))
        )
        result = session.execute(
            v.insert().from_select(["run_id", "document_id", "standard", "heads", "content_hash"], rows),
            execution_options={"preserve_rowcount": True},  # an INSERT's count is -1 on psycopg without it
        )
        return int(result.rowcount or 0)


def unchanged_documents(store: Store, run_id: int) -> int:
    """How many documents of the run's corpus still have the text the run's vectors were computed from
    (what a new run of the same settings copies from it). Raises NotFoundError."""
    with store.session(readonly=True) as session:
        require(session, EmbeddingRun, run_id, "Embedding run")
        v = EmbeddingVector.__table__
        return int(session.scalar(
            select(func.count()).select_from(v).join(Document, Document.id == v.c.document_id)
            .where(v.c.run_id == run_id, v.c.content_hash == Document.content_hash)
        ) or 0)


def reuse_candidates(store: Store, run_id: int) -> list[int]:
    """Ids of the other runs (newest first) whose vectors :func:`copy_unchanged_vectors` may copy into
    ``run_id``: same corpus, model name and path, layer, pooling, precision and shapes. Raises NotFoundError."""
    with store.session(readonly=True) as session:
        run = require(session, EmbeddingRun, run_id, "Embedding run")
        return list(
            session.scalars(
                select(EmbeddingRun.id)
                .where(EmbeddingRun.id != run.id,
                       *(getattr(EmbeddingRun, f) == getattr(run, f) for f in INTERCHANGEABLE_IF_SAME))
                .order_by(EmbeddingRun.id.desc())
            )
        )


def missing_documents(store: Store, run_id: int) -> list[int]:
    """Ids (ascending) of the run's corpus documents that have no vectors in the run yet.
    Raises NotFoundError."""
    with store.session(readonly=True) as session:
        run = require(session, EmbeddingRun, run_id, "Embedding run")
        done = select(EmbeddingVector.document_id).where(EmbeddingVector.run_id == run_id)
        return list(
            session.scalars(
                select(Document.id)
                .where(Document.corpus_id == run.corpus_id, Document.id.not_in(done))
                .order_by(Document.id)
            )
        )


def embedding_document_ids(store: Store, run_id: int) -> list[int]:
    """Ids (ascending) of the documents that have vectors in the run, without the vectors (what an index kept
    outside SQL, in Milvus, is checked against). Raises NotFoundError."""
    with store.session(readonly=True) as session:
        require(session, EmbeddingRun, run_id, "Embedding run")
        return [int(i) for i in session.scalars(
            select(EmbeddingVector.document_id).where(EmbeddingVector.run_id == run_id)
            .order_by(EmbeddingVector.document_id))]


def load_vectors(
    store: Store, run_id: int, doc_ids: Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All stored vectors of a run (or only ``doc_ids``), ordered by document id:
    ``(doc_ids int64[n], standard float32[n, dim], heads float32[n, n_heads, head_dim])``.
    The arrays are writable and bit-identical to what was saved. Raises NotFoundError."""
    with store.session(readonly=True) as session:
        run = require(session, EmbeddingRun, run_id, "Embedding run")
        dim, n_heads, head_dim = run.dim, run.n_heads, run.head_dim
        table = EmbeddingVector.__table__
        stmt = (
            select(table.c.document_id, table.c.standard, table.c.heads)
            .where(table.c.run_id == run_id)
            .order_by(table.c.document_id)
        )
        if doc_ids is not None:
            stmt = stmt.where(table.c.document_id.in_([int(i) for i in doc_ids]))
        # Core + raw DBAPI rows: no ORM objects, blobs come back as bytes.
        rows = session.connection().execute(stmt).all()
    n = len(rows)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
    std_buf = bytearray().join(r[1] for r in rows)
    head_buf = bytearray().join(r[2] for r in rows)
    if len(std_buf) != n * dim * 4 or len(head_buf) != n * n_heads * head_dim * 4:
        raise StoreError(
            f"Embedding run {run_id} holds vectors of the wrong size; the run is corrupt. "
            "Delete it and embed again."
        )
    std = np.frombuffer(std_buf, dtype=_F32).reshape(n, dim)
    hds = np.frombuffer(head_buf, dtype=_F32).reshape(n, n_heads, head_dim)
    return ids, std, hds


def set_embedding_run_status(store: Store, run_id: int, status: str, error: str = "") -> None:
    """Set a run's status (e.g. back to ``running`` to resume it); terminal statuses also
    set ``finished_at``. Raises NotFoundError, InvalidInputError."""
    with store.session() as session:
        run = require(session, EmbeddingRun, run_id, "Embedding run")
        run.status = _check_status(status)
        run.error = error
        run.finished_at = None if status == "running" else utcnow()


def claim_embedding_run(store: Store, run_id: int, owner: str) -> EmbeddingRunInfo:
    """Make ``owner`` (:func:`db.liveness.new_owner`) the process that builds run ``run_id``, to resume it:
    status ``running``, a fresh heartbeat. Raises NotFoundError, RunInProgressError (another process's
    heartbeat on it is recent)."""
    with store.session() as session:
        run = require(session, EmbeddingRun, run_id, "Embedding run")
        claim_row(session, run, "Index", owner)
        session.flush()
        return _info(session, run)


def request_embedding_stop(store: Store, run_id: int) -> bool:
    """Ask whichever process runs index build ``run_id`` to stop it after its current batch (it stores ``cancelled``,
    resumable); returns whether it was running (else there is nothing to stop)."""
    return request_stop(store, EmbeddingRun, run_id)


def embedding_stop_requested(store: Store, run_id: int) -> bool:
    """Whether a stop of index build ``run_id`` was asked and not yet carried out."""
    return stop_requested(store, EmbeddingRun, run_id)


def beat_embedding_run(store: Store, run_id: int, owner: str) -> bool:
    """Store a fresh heartbeat on run ``run_id`` while it is ``running`` and ``owner``'s; returns whether it
    was (:func:`db.liveness.beat_row`)."""
    return beat(store, EmbeddingRun, run_id, owner)


def finish_embedding_run(
    store: Store,
    run_id: int,
    *,
    status: str = "done",
    importance: Mapping[str, Any] | None = None,
    timings: Mapping[str, Any] | None = None,
    error: str = "",
    owner: str | None = None,
) -> EmbeddingRunInfo:
    """Close a run: status (done|cancelled|failed), ``finished_at``, head ``importance``
    (``{"norm": [...], "spread": [...], "score": [...]}``, numpy arrays accepted) and
    ``timings`` (merged into the stored ones). With ``owner``, only while the run is still that
    claim's: a process that fell silent, and whose run another process has since claimed, changes
    nothing. Raises NotFoundError, InvalidInputError."""
    if _check_status(status) == "running":
        raise InvalidInputError("finish_embedding_run needs a final status, not 'running'.")
    with store.session() as session:
        run = require(session, EmbeddingRun, run_id, "Embedding run")
        if not owns(run, owner):
            return _info(session, run)
        if status != "running":
            clear_stop_row(session, EmbeddingRun, run_id)
        run.status = status
        run.error = error
        run.finished_at = utcnow()
        if importance is not None:
            run.importance = to_jsonable(dict(importance))
        if timings is not None:
            run.timings = {**(run.timings or {}), **to_jsonable(dict(timings))}
        session.flush()
        return _info(session, run)


def delete_embedding_run(store: Store, run_id: int) -> None:
    """Delete a run with its vectors and projections (evaluations keep their results but
    lose the link). Raises NotFoundError."""
    with store.session() as session:
        require(session, EmbeddingRun, run_id, "Embedding run")
        session.execute(delete(EmbeddingRun).where(EmbeddingRun.id == run_id))
