"""Corpora: create, read, list, rename, delete, and the versions that record their changes.

Versioning contract:
- ``corpus.version`` is bumped by every change to the set or text of documents
  (add/update/delete). Embedding runs record it; a different value means the run is stale.
- ``corpus.labels_version`` is bumped by every change to categories, suggestions and
  decisions (label changes do not make embeddings stale, so they are counted apart).
- Labels that come with imported documents are stored as human *decisions* by annotator
  ``"import"`` (:data:`db.documents.IMPORT_ANNOTATOR`): they are ground truth from the source data set,
  not machine suggestions. Each decision bumps ``document.version`` (so a document's
  version is 1 + its number of decisions).

Categories live in :mod:`db.categories`, documents in :mod:`db.documents`; all three are re-exported by :mod:`db`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db._common import name_order, require
from db.engine import Store
from db.errors import DuplicateError, InvalidInputError, NotFoundError, process_of
from db.models import (
    Category,
    Corpus,
    Document,
    EmbeddingRun,
    EmbeddingVector,
    EvalRun,
    Query,
    QuerySet,
    utcnow,
)


@dataclass(frozen=True)
class CorpusInfo:
    """A corpus with its document and category counts."""

    id: int
    name: str
    description: str
    created_at: datetime
    updated_at: datetime
    version: int
    labels_version: int
    content_hash: str | None
    n_documents: int
    n_categories: int


# --------------------------------------------------------------------------- helpers (also used by db.categories,
# db.documents, db.annotations and db.imports inside their own write sessions)


def _corpus_info(session: Session, corpus: Corpus) -> CorpusInfo:
    n_docs = session.scalar(select(func.count()).where(Document.corpus_id == corpus.id)) or 0
    n_cats = session.scalar(select(func.count()).where(Category.corpus_id == corpus.id)) or 0
    return CorpusInfo(
        id=corpus.id,
        name=corpus.name,
        description=corpus.description,
        created_at=corpus.created_at,
        updated_at=corpus.updated_at,
        version=corpus.version,
        labels_version=corpus.labels_version,
        content_hash=corpus.content_hash,
        n_documents=n_docs,
        n_categories=n_cats,
    )


def _clean_name(name: str, what: str) -> str:
    cleaned = (name or "").strip()
    if not cleaned:
        raise InvalidInputError(f"The {what} name must not be empty.")
    if len(cleaned) > 200:
        raise InvalidInputError(f"The {what} name is longer than 200 characters.")
    return cleaned


def _refresh_content_hash(session: Session, corpus_id: int) -> str:
    # streamed (yield_per): an ORM result is otherwise fetched whole, a string per document in memory at once
    hashes = session.scalars(
        select(Document.content_hash)
        .where(Document.corpus_id == corpus_id)
        .order_by(Document.content_hash)
        .execution_options(yield_per=10_000)
    )
    digest = hashlib.sha256()
    for value in hashes:
        digest.update(value.encode("ascii"))
        digest.update(b"\n")
    return digest.hexdigest()


def bump_documents_version(session: Session, corpus_id: int) -> None:
    """Record a change of the corpus' documents (version+1, content hash, updated_at).
    For use inside an open write session."""
    session.execute(
        update(Corpus)
        .where(Corpus.id == corpus_id)
        .values(
            version=Corpus.version + 1,
            updated_at=utcnow(),
            content_hash=_refresh_content_hash(session, corpus_id),
        )
        .execution_options(synchronize_session=False)
    )


def bump_labels_version(session: Session, corpus_id: int) -> None:
    """Record a change of the corpus' labels (labels_version+1, updated_at).
    For use inside an open write session."""
    session.execute(
        update(Corpus)
        .where(Corpus.id == corpus_id)
        .values(labels_version=Corpus.labels_version + 1, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )


def create_corpus(store: Store, name: str, description: str = "") -> CorpusInfo:
    """Create an empty corpus (version 1). Raises DuplicateError if the name is taken."""
    cleaned = _clean_name(name, "corpus")
    try:
        with store.session() as session:
            clash = session.scalar(select(Corpus).where(Corpus.name == cleaned))
            if clash is not None:
                raise DuplicateError(name_taken(clash))
            corpus = Corpus(name=cleaned, description=description or "")
            session.add(corpus)
            session.flush()
            return _corpus_info(session, corpus)
    except IntegrityError as exc:  # lost a race on the unique name
        raise DuplicateError(f"A corpus named {cleaned!r} already exists.") from exc


def name_taken(corpus: Corpus) -> str:
    """Why a new corpus cannot take ``corpus``' name: it exists, or an import is writing it now."""
    if corpus.import_owner is not None:
        return (f"A corpus named {corpus.name!r} is being imported now ({process_of(corpus.import_owner)}); wait "
                "until that import ends, or choose another name.")
    return f"A corpus named {corpus.name!r} already exists."


def get_corpus(store: Store, corpus_id: int) -> CorpusInfo:
    """The corpus with this id. Raises NotFoundError (also for a corpus an import is still writing)."""
    with store.session(readonly=True) as session:
        corpus = require(session, Corpus, corpus_id, "Corpus")
        if corpus.import_owner is not None:
            raise NotFoundError("Corpus", corpus_id)
        return _corpus_info(session, corpus)


def get_corpus_by_name(store: Store, name: str) -> CorpusInfo:
    """The corpus with this (exact) name. Raises NotFoundError (also while an import still writes it)."""
    with store.session(readonly=True) as session:
        corpus = session.scalar(select(Corpus).where(Corpus.name == name.strip(), Corpus.import_owner.is_(None)))
        if corpus is None:
            raise NotFoundError("Corpus", name)
        return _corpus_info(session, corpus)


def list_corpora(store: Store) -> list[CorpusInfo]:
    """All corpora ordered by name (:func:`~db._common.name_order`), less those an import still writes."""
    n_docs = (
        select(func.count()).where(Document.corpus_id == Corpus.id).correlate(Corpus).scalar_subquery()
    )
    n_cats = (
        select(func.count()).where(Category.corpus_id == Corpus.id).correlate(Corpus).scalar_subquery()
    )
    with store.session(readonly=True) as session:
        rows = sorted(session.execute(select(Corpus, n_docs, n_cats).where(Corpus.import_owner.is_(None))).all(),
                      key=lambda r: name_order(r[0].name))
        return [
            CorpusInfo(
                id=c.id,
                name=c.name,
                description=c.description,
                created_at=c.created_at,
                updated_at=c.updated_at,
                version=c.version,
                labels_version=c.labels_version,
                content_hash=c.content_hash,
                n_documents=nd,
                n_categories=nc,
            )
            for c, nd, nc in rows
        ]


def rename_corpus(
    store: Store, corpus_id: int, new_name: str, description: str | None = None
) -> CorpusInfo:
    """Rename (and optionally re-describe) a corpus. Raises NotFoundError, DuplicateError."""
    cleaned = _clean_name(new_name, "corpus")
    try:
        with store.session() as session:
            corpus = require(session, Corpus, corpus_id, "Corpus")
            clash = session.scalar(
                select(Corpus.id).where(Corpus.name == cleaned, Corpus.id != corpus_id)
            )
            if clash is not None:
                raise DuplicateError(f"A corpus named {cleaned!r} already exists.")
            corpus.name = cleaned
            if description is not None:
                corpus.description = description
            corpus.updated_at = utcnow()
            session.flush()
            return _corpus_info(session, corpus)
    except IntegrityError as exc:
        raise DuplicateError(f"A corpus named {cleaned!r} already exists.") from exc


@dataclass(frozen=True)
class CorpusFootprint:
    """What a corpus holds besides its documents: all of it goes when the corpus is deleted.
    ``vector_bytes``: the stored float32 vectors of its indexes (n_saved x (dim + h x head_dim) x 4 per index)."""

    corpus_id: int
    n_query_sets: int
    n_queries: int
    n_indexes: int
    vector_bytes: int
    n_eval_runs: int


def corpus_footprints(store: Store) -> dict[int, CorpusFootprint]:
    """:class:`CorpusFootprint` of every corpus, by corpus id (a few grouped counts, not a query per corpus)."""
    with store.session(readonly=True) as session:
        ids = session.scalars(select(Corpus.id).where(Corpus.import_owner.is_(None))).all()
        sets = dict(session.execute(select(QuerySet.corpus_id, func.count()).group_by(QuerySet.corpus_id)).all())
        queries = dict(session.execute(
            select(QuerySet.corpus_id, func.count()).join(Query, Query.query_set_id == QuerySet.id)
            .group_by(QuerySet.corpus_id)).all())
        runs = dict(session.execute(
            select(EmbeddingRun.corpus_id, func.count()).group_by(EmbeddingRun.corpus_id)).all())
        evals = dict(session.execute(select(EvalRun.corpus_id, func.count()).group_by(EvalRun.corpus_id)).all())
        per_vector = (EmbeddingRun.dim + EmbeddingRun.n_heads * EmbeddingRun.head_dim) * 4
        sizes = dict(session.execute(
            select(EmbeddingRun.corpus_id, func.sum(per_vector))
            .join(EmbeddingVector, EmbeddingVector.run_id == EmbeddingRun.id)
            .group_by(EmbeddingRun.corpus_id)).all())
    return {i: CorpusFootprint(i, int(sets.get(i, 0)), int(queries.get(i, 0)), int(runs.get(i, 0)),
                               int(sizes.get(i) or 0), int(evals.get(i, 0))) for i in ids}


def delete_corpus(store: Store, corpus_id: int) -> None:
    """Delete a corpus and everything that belongs to it (documents, labels, query sets,
    embedding runs, projections, evaluations). Raises NotFoundError."""
    with store.session() as session:
        require(session, Corpus, corpus_id, "Corpus")
        session.execute(delete(Corpus).where(Corpus.id == corpus_id))
