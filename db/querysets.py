"""Query sets: named lists of multi-aspect queries with their ground-truth documents.

Contracts: a query's ground truth is an ordered list of distinct document ids of the query
set's corpus (order = ``position``). Queries keep their insertion order (``position``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db._common import require
from db.engine import Store
from db.errors import DuplicateError, InvalidInputError, NotFoundError
from db.models import Corpus, Document, Query, QueryGroundTruth, QuerySet

QUERY_STATUSES = ("ok", "flagged", "failed")


@dataclass(frozen=True)
class QuerySetInfo:
    """A query set with its number of queries."""

    id: int
    corpus_id: int
    name: str
    description: str
    source: str
    params: dict[str, Any]
    created_at: datetime
    n_queries: int


@dataclass(frozen=True)
class QueryRow:
    """A query with its ground-truth document ids (in order)."""

    id: int
    query_set_id: int
    text: str
    n_aspects: int
    status: str
    fusion: list[str]
    generator: str
    error: str
    created_at: datetime
    position: int
    ground_truth: list[int]


def _set_info(session: Session, qs: QuerySet) -> QuerySetInfo:
    n = session.scalar(select(func.count()).where(Query.query_set_id == qs.id)) or 0
    return QuerySetInfo(
        id=qs.id,
        corpus_id=qs.corpus_id,
        name=qs.name,
        description=qs.description,
        source=qs.source,
        params=dict(qs.params or {}),
        created_at=qs.created_at,
        n_queries=n,
    )


def _check_ground_truth(
    session: Session, corpus_id: int, ground_truth: Sequence[int], where: str
) -> list[int]:
    ids = [int(d) for d in ground_truth]
    if len(set(ids)) != len(ids):
        raise InvalidInputError(f"{where}: the ground truth lists a document twice.")
    if ids:
        found = set(
            session.scalars(
                select(Document.id).where(Document.id.in_(ids), Document.corpus_id == corpus_id)
            )
        )
        missing = [d for d in ids if d not in found]
        if missing:
            raise InvalidInputError(
                f"{where}: document {missing[0]} is not in the query set's corpus."
            )
    return ids


def _check_status(status: str, where: str) -> str:
    if status not in QUERY_STATUSES:
        raise InvalidInputError(f"{where}: status must be one of {QUERY_STATUSES}, not {status!r}.")
    return status


def _write_ground_truth(session: Session, query_id: int, ids: Sequence[int]) -> None:
    session.execute(delete(QueryGroundTruth).where(QueryGroundTruth.query_id == query_id))
    if ids:
        session.execute(
            QueryGroundTruth.__table__.insert(),
            [{"query_id": query_id, "document_id": d, "position": i} for i, d in enumerate(ids)],
        )


def create_query_set(
    store: Store,
    corpus_id: int,
    name: str,
    *,
    description: str = "",
    source: str = "manual",
    params: Mapping[str, Any] | None = None,
) -> QuerySetInfo:
    """Create an empty query set. ``source`` says where queries come from
    (``generated-llm``, ``generated-offline``, ``imported``, ``manual``...); ``params`` is
    any JSON (generation settings). Raises NotFoundError, DuplicateError (name taken in
    this corpus), InvalidInputError (empty name)."""
    cleaned = (name or "").strip()
    if not cleaned:
        raise InvalidInputError("The query set name must not be empty.")
    try:
        with store.session() as session:
            require(session, Corpus, corpus_id, "Corpus")
            clash = session.scalar(
                select(QuerySet.id).where(QuerySet.corpus_id == corpus_id, QuerySet.name == cleaned)
            )
            if clash is not None:
                raise DuplicateError(f"This corpus already has a query set named {cleaned!r}.")
            qs = QuerySet(
                corpus_id=corpus_id,
                name=cleaned,
                description=description,
                source=source,
                params=dict(params or {}),
            )
            session.add(qs)
            session.flush()
            return _set_info(session, qs)
    except IntegrityError as exc:
        raise DuplicateError(f"This corpus already has a query set named {cleaned!r}.") from exc


def add_queries(
    store: Store, query_set_id: int, queries: Sequence[Mapping[str, Any]]
) -> list[int]:
    """Append queries with their ground truth in ONE transaction; returns ids in order.

    Each mapping: ``text`` (required unless ``status="failed"``), ``ground_truth``
    (document ids of the set's corpus), optional ``n_aspects`` (default: number of
    ground-truth docs, at least 1), ``status`` (ok|flagged|failed), ``fusion`` (list of
    strings), ``generator``, ``error``. Raises NotFoundError, InvalidInputError (names
    the query); nothing is stored then.
    """
    with store.session() as session:
        qs = require(session, QuerySet, query_set_id, "Query set")
        start = session.scalar(
            select(func.coalesce(func.max(Query.position) + 1, 0)).where(
                Query.query_set_id == query_set_id
            )
        )
        ids: list[int] = []
        for offset, item in enumerate(queries):
            where = f"Query #{offset + 1}"
            status = _check_status(str(item.get("status") or "ok"), where)
            text = str(item.get("text") or "")
            if not text.strip() and status != "failed":
                raise InvalidInputError(f"{where} has no text.")
            gt = _check_ground_truth(session, qs.corpus_id, item.get("ground_truth") or [], where)
            query = Query(
                query_set_id=query_set_id,
                text=text,
                n_aspects=int(item.get("n_aspects") or max(len(gt), 1)),
                status=status,
                fusion=[str(f) for f in item.get("fusion") or []],
                generator=str(item.get("generator") or ""),
                error=str(item.get("error") or ""),
                position=int(start or 0) + offset,
            )
            session.add(query)
            session.flush()
            _write_ground_truth(session, query.id, gt)
            ids.append(query.id)
        return ids


def update_query(
    store: Store,
    query_id: int,
    *,
    text: str | None = None,
    status: str | None = None,
    ground_truth: Sequence[int] | None = None,
    fusion: Sequence[str] | None = None,
    n_aspects: int | None = None,
    error: str | None = None,
) -> QueryRow:
    """Change some fields of a query (None = leave as is); ``ground_truth`` replaces the
    whole list. Raises NotFoundError, InvalidInputError."""
    with store.session() as session:
        query = require(session, Query, query_id, "Query")
        where = f"Query {query_id}"
        if text is not None:
            if not text.strip():
                raise InvalidInputError(f"{where}: the text must not be empty.")
            query.text = text
        if status is not None:
            query.status = _check_status(status, where)
        if fusion is not None:
            query.fusion = [str(f) for f in fusion]
        if n_aspects is not None:
            query.n_aspects = int(n_aspects)
        if error is not None:
            query.error = error
        if ground_truth is not None:
            corpus_id = session.scalar(
                select(QuerySet.corpus_id).where(QuerySet.id == query.query_set_id)
            )
            assert corpus_id is not None
            _write_ground_truth(
                session, query_id, _check_ground_truth(session, corpus_id, ground_truth, where)
            )
        session.flush()
    return get_query(store, query_id)


def _query_rows(session: Session, queries: Sequence[Query]) -> list[QueryRow]:
    ids = [q.id for q in queries]
    gt: dict[int, list[int]] = {i: [] for i in ids}
    if ids:
        for qid, did in session.execute(
            select(QueryGroundTruth.query_id, QueryGroundTruth.document_id)
            .where(QueryGroundTruth.query_id.in_(ids))
            .order_by(QueryGroundTruth.query_id, QueryGroundTruth.position)
        ):
            gt[qid].append(did)
    return [
        QueryRow(
            id=q.id,
            query_set_id=q.query_set_id,
            text=q.text,
            n_aspects=q.n_aspects,
            status=q.status,
            fusion=list(q.fusion or []),
            generator=q.generator,
            error=q.error,
            created_at=q.created_at,
            position=q.position,
            ground_truth=gt[q.id],
        )
        for q in queries
    ]


def get_query(store: Store, query_id: int) -> QueryRow:
    """One query with its ground truth. Raises NotFoundError."""
    with store.session(readonly=True) as session:
        return _query_rows(session, [require(session, Query, query_id, "Query")])[0]


def list_queries(
    store: Store, query_set_id: int, *, status: str | None = None
) -> list[QueryRow]:
    """Queries of a set in position order, optionally only those with ``status``."""
    with store.session(readonly=True) as session:
        stmt = select(Query).where(Query.query_set_id == query_set_id)
        if status is not None:
            stmt = stmt.where(Query.status == status)
        return _query_rows(session, list(session.scalars(stmt.order_by(Query.position, Query.id))))


def get_query_set(store: Store, query_set_id: int) -> QuerySetInfo:
    """One query set. Raises NotFoundError."""
    with store.session(readonly=True) as session:
        return _set_info(session, require(session, QuerySet, query_set_id, "Query set"))


def list_query_sets(store: Store, corpus_id: int | None = None) -> list[QuerySetInfo]:
    """Query sets (of one corpus, or all), newest first."""
    with store.session(readonly=True) as session:
        stmt = select(QuerySet).order_by(QuerySet.id.desc())
        if corpus_id is not None:
            stmt = stmt.where(QuerySet.corpus_id == corpus_id)
        return [_set_info(session, qs) for qs in session.scalars(stmt)]


def delete_query(store: Store, query_id: int) -> None:
    """Delete one query (and its ground truth and eval results). Raises NotFoundError."""
    with store.session() as session:
        require(session, Query, query_id, "Query")
        session.execute(delete(Query).where(Query.id == query_id))


def delete_query_set(store: Store, query_set_id: int) -> None:
    """Delete a query set with its queries and the evaluation runs made on it.
    Raises NotFoundError."""
    with store.session() as session:
        if session.get(QuerySet, query_set_id) is None:
            raise NotFoundError("Query set", query_set_id)
        session.execute(delete(QuerySet).where(QuerySet.id == query_set_id))
