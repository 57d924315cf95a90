"""Corpora, their categories and documents: create, read, list, rename, delete, import.

Versioning contract:
- ``corpus.version`` is bumped by every change to the set or text of documents
  (add/update/delete). Embedding runs record it; a different value means the run is stale.
- ``corpus.labels_version`` is bumped by every change to categories, suggestions and
  decisions (label changes do not make embeddings stale, so they are counted apart).
- Labels that come with imported documents are stored as human *decisions* by annotator
  ``"import"`` (:data:`IMPORT_ANNOTATOR`): they are ground truth from the source data set,
  not machine suggestions. Each decision bumps ``document.version`` (so a document's
  version is 1 + its number of decisions).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db._common import LIKE_ESCAPE, like_pattern, name_order, require, sha256_hex
from db._labels import latest_decision, latest_suggestion, version_conflict
from db.engine import Store
from db.errors import DuplicateError, InvalidInputError, NotFoundError, StoreError, process_of
from db.liveness import LeaseRef, refuse_while_leased
from db.models import (
    Category,
    Corpus,
    Decision,
    Document,
    EmbeddingRun,
    EmbeddingVector,
    EvalRun,
    Query,
    QueryGroundTruth,
    QuerySet,
    Suggestion,
    utcnow,
)

IMPORT_ANNOTATOR = "import"


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


@dataclass(frozen=True)
class CategoryInfo:
    """A category of a corpus."""

    id: int
    corpus_id: int
    name: str
    description: str


@dataclass(frozen=True)
class DocumentRow:
    """A document with its effective label (latest decision, else latest ok suggestion).

    ``label_source`` is ``"decision"``, ``"suggestion"`` or None (no label). A chunk names
    its source document in ``chunk_of`` (title) with ``chunk_index`` (0-based) of
    ``chunk_count``; see :attr:`chunk_label`.
    """

    id: int
    corpus_id: int
    title: str
    text: str
    source: str
    content_hash: str
    parent_id: int | None
    chunk_index: int | None
    version: int
    created_at: datetime
    label_category_id: int | None = None
    label: str | None = None
    label_source: str | None = None
    chunk_of: str | None = None
    chunk_count: int | None = None

    @property
    def chunk_label(self) -> str | None:
        """``"chunk 2 of 5 of 'Rome'"`` for a chunk, None for a whole document."""
        if self.chunk_of is None or self.chunk_index is None:
            return None
        of_n = f" of {self.chunk_count}" if self.chunk_count else ""
        return f"chunk {self.chunk_index + 1}{of_n} of '{self.chunk_of}'"


@dataclass(frozen=True)
class DocumentPage:
    """One page of :func:`list_documents`; ``total`` counts all matches, not just this page."""

    items: list[DocumentRow]
    total: int
    offset: int
    limit: int | None


@dataclass(frozen=True)
class AddResult:
    """Outcome of :func:`add_documents`.

    ``document_ids`` are the new ids in input order of the added documents;
    ``duplicate_indices`` are input positions skipped as duplicates.
    """

    added: int
    skipped_duplicates: int
    document_ids: list[int]
    duplicate_indices: list[int]


# --------------------------------------------------------------------------- helpers


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


def _category_info(category: Category) -> CategoryInfo:
    return CategoryInfo(
        id=category.id,
        corpus_id=category.corpus_id,
        name=category.name,
        description=category.description,
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


def _document_select(corpus_id: int) -> Any:
    """SELECT of documents joined with their effective label (used by the list functions)."""
    dec = latest_decision()
    sug = latest_suggestion()
    label_id = func.coalesce(dec.row.category_id, sug.row.category_id)
    stmt = (
        select(
            Document,
            dec.row.category_id.label("dec_cat"),
            sug.row.category_id.label("sug_cat"),
        )
        .select_from(Document)
        .outerjoin(dec.row, dec.on)
        .outerjoin(sug.row, sug.on)
        .where(Document.corpus_id == corpus_id)
    )
    return stmt, label_id, dec.row, sug.row


def _to_row(
    doc: Document, dec_cat: int | None, sug_cat: int | None, names: Mapping[int, str]
) -> DocumentRow:
    if dec_cat is not None:
        cat_id, source = dec_cat, "decision"
    elif sug_cat is not None:
        cat_id, source = sug_cat, "suggestion"
    else:
        cat_id, source = None, None
    return DocumentRow(
        id=doc.id,
        corpus_id=doc.corpus_id,
        title=doc.title,
        text=doc.text,
        source=doc.source,
        content_hash=doc.content_hash,
        parent_id=doc.parent_id,
        chunk_index=doc.chunk_index,
        version=doc.version,
        created_at=doc.created_at,
        label_category_id=cat_id,
        label=names.get(cat_id) if cat_id is not None else None,
        label_source=source,
        chunk_of=doc.chunk_of,
        chunk_count=doc.chunk_count,
    )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _category_names(session: Session, corpus_id: int) -> dict[int, str]:
    stmt = select(Category.id, Category.name).where(Category.corpus_id == corpus_id)
    return {cid: name for cid, name in session.execute(stmt)}


# --------------------------------------------------------------------------- corpora


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


# --------------------------------------------------------------------------- categories


def add_categories(
    store: Store, corpus_id: int, categories: Sequence[str | Mapping[str, str]]
) -> list[CategoryInfo]:
    """Ensure these categories exist (each a name or ``{"name", "description"}``) and return
    them in input order; existing names are returned unchanged (idempotent). Bumps
    ``labels_version`` when something was created. Raises NotFoundError, InvalidInputError."""
    with store.session() as session:
        require(session, Corpus, corpus_id, "Corpus")
        result = _ensure_categories(session, corpus_id, categories)
        return [_category_info(c) for c in result]


def _ensure_categories(
    session: Session, corpus_id: int, categories: Sequence[str | Mapping[str, str]]
) -> list[Category]:
    existing = {
        c.name: c for c in session.scalars(select(Category).where(Category.corpus_id == corpus_id))
    }
    out: list[Category] = []
    created = False
    for item in categories:
        if isinstance(item, str):
            name, description = item, ""
        else:
            name, description = item.get("name", ""), item.get("description", "") or ""
        cleaned = _clean_name(name, "category")
        category = existing.get(cleaned)
        if category is None:
            category = Category(corpus_id=corpus_id, name=cleaned, description=description)
            session.add(category)
            existing[cleaned] = category
            created = True
        out.append(category)
    if created:
        session.flush()
        bump_labels_version(session, corpus_id)
    return out


def list_categories(store: Store, corpus_id: int) -> list[CategoryInfo]:
    """Categories of a corpus ordered by name (:func:`~db._common.name_order`; empty list for an unknown
    corpus)."""
    with store.session(readonly=True) as session:
        rows = session.scalars(select(Category).where(Category.corpus_id == corpus_id))
        return sorted((_category_info(c) for c in rows), key=lambda c: name_order(c.name))


def update_category(
    store: Store, category_id: int, *, name: str | None = None, description: str | None = None
) -> CategoryInfo:
    """Rename / re-describe a category. Raises NotFoundError, DuplicateError."""
    with store.session() as session:
        category = require(session, Category, category_id, "Category")
        if name is not None:
            cleaned = _clean_name(name, "category")
            clash = session.scalar(
                select(Category.id).where(
                    Category.corpus_id == category.corpus_id,
                    Category.name == cleaned,
                    Category.id != category_id,
                )
            )
            if clash is not None:
                raise DuplicateError(f"This corpus already has a category named {cleaned!r}.")
            category.name = cleaned
        if description is not None:
            category.description = description
        session.flush()
        bump_labels_version(session, category.corpus_id)
        return _category_info(category)


@dataclass(frozen=True)
class CategoryUsage:
    """What uses a category, as a deletion or merge would change it: ``n_labelled`` documents have it as their
    effective label (``n_decided`` of them by a human or import decision, the others by a suggestion);
    ``n_decisions`` / ``n_suggestions`` stored rows name it (any annotator, older ones too); ``query_ids``: the
    queries (any query set of the corpus) whose ground truth has a document labelled with it; ``n_eval_runs``:
    the corpus' stored evaluation runs (their scores were computed with the labels of their time);
    ``labels_version``: the corpus' labels version these counts were read at."""

    category: CategoryInfo
    n_labelled: int
    n_decided: int
    n_decisions: int
    n_suggestions: int
    query_ids: list[int]
    n_eval_runs: int
    labels_version: int


@dataclass(frozen=True)
class CategoryRemoval:
    """What :func:`delete_category` or :func:`merge_category` did to category ``name``: ``merged_into`` names the
    category that took its labels (None: deleted with them); ``n_decisions`` / ``n_suggestions`` rows were moved
    (merge) or deleted; of the documents labelled ``name`` before, ``n_relabelled`` are labelled ``merged_into``
    now, ``n_fallback`` fell back to an earlier label (another decision or suggestion) and ``n_unlabelled`` have
    none; ``flagged_queries``: ids of the queries flagged because their ground truth's categories changed."""

    name: str
    merged_into: str | None
    n_decisions: int
    n_suggestions: int
    n_relabelled: int
    n_fallback: int
    n_unlabelled: int
    flagged_queries: list[int]


def _effective_categories(session: Session, corpus_id: int) -> dict[int, tuple[int, bool]]:
    """``{document id: (category id, by a decision)}`` of the corpus' labelled documents: the latest decision,
    else the latest ok suggestion (as :func:`db.annotations.effective_labels`), read in ``session``."""
    dj, sj = latest_decision(), latest_suggestion()
    rows = session.execute(
        select(Document.id, dj.row.category_id, sj.row.category_id)
        .select_from(Document)
        .outerjoin(dj.row, dj.on)
        .outerjoin(sj.row, sj.on)
        .where(Document.corpus_id == corpus_id)
    ).all()
    return {int(d): (int(dec), True) if dec is not None else (int(sug), False)
            for d, dec, sug in rows if dec is not None or sug is not None}


def _ground_truth_of(session: Session, corpus_id: int) -> dict[int, list[int]]:
    """``{query id: [ground-truth document ids]}`` of the queries of the corpus' query sets."""
    rows = session.execute(
        select(QueryGroundTruth.query_id, QueryGroundTruth.document_id)
        .join(Query, Query.id == QueryGroundTruth.query_id)
        .join(QuerySet, QuerySet.id == Query.query_set_id)
        .where(QuerySet.corpus_id == corpus_id)
        .order_by(QueryGroundTruth.query_id, QueryGroundTruth.position, QueryGroundTruth.document_id)
    ).all()
    out: dict[int, list[int]] = {}
    for query_id, document_id in rows:
        out.setdefault(int(query_id), []).append(int(document_id))
    return out


def _label_rows(session: Session, category_id: int) -> tuple[int, int]:
    """(decisions, suggestions) naming the category."""
    n_dec = session.scalar(select(func.count()).select_from(Decision).where(Decision.category_id == category_id))
    n_sug = session.scalar(select(func.count()).select_from(Suggestion).where(Suggestion.category_id == category_id))
    return int(n_dec or 0), int(n_sug or 0)


def category_usage(store: Store, category_id: int) -> CategoryUsage:
    """:class:`CategoryUsage` of a category, read in one transaction. Raises NotFoundError."""
    with store.session(readonly=True) as session:
        category = require(session, Category, category_id, "Category")
        corpus = require(session, Corpus, category.corpus_id, "Corpus")
        labels = _effective_categories(session, corpus.id)
        labelled = {d for d, (c, _) in labels.items() if c == category_id}
        queries = sorted(q for q, docs in _ground_truth_of(session, corpus.id).items() if labelled.intersection(docs))
        n_dec, n_sug = _label_rows(session, category_id)
        n_runs = session.scalar(select(func.count()).select_from(EvalRun).where(EvalRun.corpus_id == corpus.id))
        return CategoryUsage(_category_info(category), len(labelled), sum(labels[d][1] for d in labelled), n_dec,
                             n_sug, queries, int(n_runs or 0), corpus.labels_version)


def _check_labels_version(corpus: Corpus, expected: int | None) -> None:
    if expected is not None and corpus.labels_version != expected:
        raise StoreError(f"The labels of corpus {corpus.name!r} changed since they were counted (another annotator "
                         "or tab saved labels or categories meanwhile); nothing was changed. Look at the counts "
                         "again, then repeat.")


def _flag(session: Session, notes: Mapping[int, str]) -> list[int]:
    """Flag the queries ``notes`` names (status ok -> flagged), each ``error`` extended by its note; their ids."""
    for query in session.scalars(select(Query).where(Query.id.in_(list(notes)))):
        query.error = f"{query.error}; {notes[query.id]}" if query.error else notes[query.id]
        if query.status == "ok":
            query.status = "flagged"
    return sorted(notes)


def delete_category(store: Store, category_id: int, *, expected_labels_version: int | None = None,
                    unless_leased: LeaseRef | None = None) -> CategoryRemoval:
    """Delete a category together with the suggestions and decisions that used it, in one transaction.

    Its documents fall back to their next latest label (an older decision or suggestion of another category) or
    become unlabelled; queries whose ground truth held such a document are flagged, their ``error`` naming the
    document and the deleted category (their ground truth is kept). ``expected_labels_version``: refuse
    (StoreError, nothing changed) when the corpus' labels changed since the caller counted them
    (:func:`category_usage`). ``unless_leased``: refuse (:class:`~db.liveness.LeaseHeldError`, nothing changed)
    while that lease is held, e.g. a pre-annotation of the corpus (checked in the same transaction,
    :func:`~db.liveness.refuse_while_leased`). Bumps ``labels_version``. Raises NotFoundError, StoreError."""
    with store.session() as session:
        if unless_leased is not None:
            refuse_while_leased(session, unless_leased)
        category = require(session, Category, category_id, "Category")
        corpus = require(session, Corpus, category.corpus_id, "Corpus")
        _check_labels_version(corpus, expected_labels_version)
        name, corpus_id = category.name, corpus.id
        before = _effective_categories(session, corpus_id)
        n_dec, n_sug = _label_rows(session, category_id)
        session.execute(delete(Category).where(Category.id == category_id)
                        .execution_options(synchronize_session=False))
        session.flush()
        after = _effective_categories(session, corpus_id)
        moved = [d for d, (c, _) in before.items() if c == category_id]
        titles = dict(session.execute(select(Document.id, Document.title).where(Document.id.in_(moved))).all())
        notes = {}
        for query_id, docs in _ground_truth_of(session, corpus_id).items():
            lost = [d for d in docs if d in titles]
            if lost:
                notes[query_id] = "; ".join(
                    f"ground-truth document {titles[d] or '#' + str(d)!r} (#{d}) lost its category {name!r} "
                    "(the category was deleted)" for d in lost)
        flagged = _flag(session, notes)
        bump_labels_version(session, corpus_id)
        n_fallback = sum(1 for d in moved if d in after)
        return CategoryRemoval(name, None, n_dec, n_sug, 0, n_fallback, len(moved) - n_fallback, flagged)


def merge_category(store: Store, category_id: int, into_id: int, *, new_name: str | None = None,
                   expected_labels_version: int | None = None, unless_leased: LeaseRef | None = None
                   ) -> CategoryRemoval:
    """Merge category ``category_id`` into ``into_id`` (same corpus) in one transaction: every decision and
    suggestion naming it names ``into_id`` instead (their order, hence each document's latest label, is kept),
    then it is deleted. ``into_id`` keeps its description (takes this one's when it has none) and, with
    ``new_name``, is renamed to it (e.g. 'Physics' and 'physics' merged as 'Physics'). Queries whose ground
    truth had documents of both categories are flagged: their aspects now share one category.
    ``expected_labels_version`` and ``unless_leased`` as in :func:`delete_category`. Bumps ``labels_version``.
    Raises NotFoundError, InvalidInputError (the same category, or another corpus'), DuplicateError (``new_name``
    is a third category's), StoreError."""
    with store.session() as session:
        if unless_leased is not None:
            refuse_while_leased(session, unless_leased)
        category = require(session, Category, category_id, "Category")
        into = require(session, Category, into_id, "Category")
        if category.id == into.id or category.corpus_id != into.corpus_id:
            raise InvalidInputError("A category can only be merged into another category of the same corpus.")
        corpus = require(session, Corpus, category.corpus_id, "Corpus")
        _check_labels_version(corpus, expected_labels_version)
        name, corpus_id = category.name, corpus.id
        cleaned = _clean_name(new_name, "category") if new_name is not None else into.name
        clash = session.scalar(select(Category.id).where(Category.corpus_id == corpus_id, Category.name == cleaned,
                                                         Category.id.not_in([category_id, into_id])))
        if clash is not None:
            raise DuplicateError(f"This corpus already has a category named {cleaned!r}.")
        before = _effective_categories(session, corpus_id)
        n_dec, n_sug = _label_rows(session, category_id)
        for table in (Decision, Suggestion):
            session.execute(update(table).where(table.category_id == category_id).values(category_id=into_id)
                            .execution_options(synchronize_session=False))
        if not into.description.strip():
            into.description = category.description
        session.execute(delete(Category).where(Category.id == category_id)
                        .execution_options(synchronize_session=False))
        session.flush()
        if cleaned != into.name:
            into.name = cleaned
            session.flush()
        notes = {}
        for query_id, docs in _ground_truth_of(session, corpus_id).items():
            cats = {before[d][0] for d in docs if d in before}
            if {category_id, into_id} <= cats:
                shared = ", ".join(f"#{d}" for d in docs if d in before and before[d][0] in (category_id, into_id))
                notes[query_id] = (f"category {name!r} was merged into {cleaned!r}: ground-truth documents {shared} "
                                   "now share one category")
        flagged = _flag(session, notes)
        bump_labels_version(session, corpus_id)
        n_moved = sum(1 for c, _ in before.values() if c == category_id)
        return CategoryRemoval(name, cleaned, n_dec, n_sug, n_moved, 0, 0, flagged)


# --------------------------------------------------------------------------- documents


def add_documents(
    store: Store,
    corpus_id: int,
    docs: Sequence[Mapping[str, Any]],
    dedupe: bool = True,
    create_missing_categories: bool = True,
) -> AddResult:
    """Add documents in ONE transaction: either all of them are stored or none.

    Each doc is a mapping with ``text`` (required, non-blank) and optional ``title``,
    ``source``, ``label`` (category name), ``suggested_label`` (a category name stored as a
    suggestion by agent ``"import"``, not a decision: an exported machine suggestion read back),
    ``parent_id`` (an existing document of this
    corpus: the doc is a chunk of it), ``chunk_index`` (0-based), ``chunk_of`` (title of the
    source document a chunk was cut from) and ``chunk_count`` (its number of chunks).

    Duplicates (same sha256 of ``text`` in the corpus or earlier in ``docs``) are skipped
    when ``dedupe`` is true, else raise DuplicateError. A ``label`` is stored as a decision
    by annotator ``"import"``; unknown label names create the category unless
    ``create_missing_categories`` is false (then InvalidInputError). Bumps
    ``corpus.version`` if anything was added (and ``labels_version`` if labels were).

    Raises:
        NotFoundError: unknown corpus.
        InvalidInputError: a doc without text, a bad parent_id or label (names its index).
        DuplicateError: a duplicate text with ``dedupe=False``.
    """
    with store.session() as session:
        require(session, Corpus, corpus_id, "Corpus")
        seen = set(session.scalars(select(Document.content_hash).where(Document.corpus_id == corpus_id)))
        return insert_documents(session, corpus_id, docs, seen, dedupe=dedupe,
                                create_missing_categories=create_missing_categories)


def insert_documents(session: Session, corpus_id: int, docs: Sequence[Mapping[str, Any]], stored: set[str], *,
                     dedupe: bool = True, create_missing_categories: bool = True, bump: bool = True,
                     first_index: int = 0, stored_means: str = "already in the corpus") -> AddResult:
    """:func:`add_documents`' work inside an open write ``session``: ``stored`` holds the content hashes of the
    corpus' documents that ``docs`` may repeat (all of them, or just those among ``docs``' hashes). ``bump=False``
    leaves the corpus' versions alone (an import that publishes the corpus later bumps them once). Messages count
    documents from ``first_index`` + 1 (the position of ``docs[0]`` in the whole import) and say that a text in
    ``stored`` is ``stored_means``."""
    seen: dict[str, int] = {h: -1 for h in stored}
    categories = {
        c.name: c
        for c in session.scalars(select(Category).where(Category.corpus_id == corpus_id))
    }
    new_docs: list[Document] = []
    labels: list[Category | None] = []
    suggested: list[Category | None] = []
    duplicates: list[int] = []
    parent_ids: set[int] = set()
    for index, doc in enumerate(docs):
        text = doc.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(f"Document #{first_index + index + 1} has no text.")
        content_hash = sha256_hex(text)
        if content_hash in seen:
            if not dedupe:
                where = stored_means if seen[content_hash] < 0 else (
                    f"the same as document #{first_index + seen[content_hash] + 1}"
                )
                raise DuplicateError(
                    f"Document #{first_index + index + 1} ({str(doc.get('title') or text[:40])!r}) is {where}."
                )
            duplicates.append(index)
            continue
        seen[content_hash] = index
        def category_of(label_name: Any) -> Category | None:
            if label_name is None or not str(label_name).strip():
                return None
            cleaned = str(label_name).strip()
            found = categories.get(cleaned)
            if found is None:
                if not create_missing_categories:
                    raise InvalidInputError(
                        f"Document #{first_index + index + 1} has label {cleaned!r}, which is not a "
                        "category of this corpus."
                    )
                found = _ensure_categories(session, corpus_id, [cleaned])[0]
                categories[cleaned] = found
            return found

        category = category_of(doc.get("label"))
        suggested.append(category_of(doc.get("suggested_label")))
        parent_id = doc.get("parent_id")
        if parent_id is not None:
            parent_ids.add(int(parent_id))
        new_docs.append(
            Document(
                corpus_id=corpus_id,
                title=str(doc.get("title") or ""),
                text=text,
                source=str(doc.get("source") or ""),
                content_hash=content_hash,
                parent_id=int(parent_id) if parent_id is not None else None,
                chunk_index=_opt_int(doc.get("chunk_index")),
                chunk_of=_opt_str(doc.get("chunk_of")),
                chunk_count=_opt_int(doc.get("chunk_count")),
                version=2 if category is not None else 1,
            )
        )
        labels.append(category)

    if parent_ids:
        found = set(
            session.scalars(
                select(Document.id).where(
                    Document.id.in_(parent_ids), Document.corpus_id == corpus_id
                )
            )
        )
        missing = sorted(parent_ids - found)
        if missing:
            raise InvalidInputError(
                f"parent_id {missing[0]} is not a document of this corpus."
            )

    if new_docs:
        session.add_all(new_docs)
        session.flush()
        _record_import_labels(session, new_docs, labels)
        session.add_all(Suggestion(document_id=d.id, category_id=c.id, status="ok", agent=IMPORT_ANNOTATOR,
                                   model_version="exported suggestion",
                                   reason="marked label_source = suggestion in the imported file")
                        for d, c in zip(new_docs, suggested) if c is not None)
        if bump:
            bump_documents_version(session, corpus_id)
            if any(c is not None for c in [*labels, *suggested]):
                bump_labels_version(session, corpus_id)
    return AddResult(
        added=len(new_docs),
        skipped_duplicates=len(duplicates),
        document_ids=[d.id for d in new_docs],
        duplicate_indices=duplicates,
    )


def _record_import_labels(
    session: Session, new_docs: Sequence[Document], labels: Sequence[Category | None]
) -> None:
    """Store import labels as decisions by annotator ``"import"`` (based on version 1)."""
    now = utcnow()
    rows = [
        {
            "document_id": doc.id,
            "category_id": category.id,
            "annotator": IMPORT_ANNOTATOR,
            "created_at": now,
            "based_on_version": 1,
            "suggestion_id": None,
            "note": "",
        }
        for doc, category in zip(new_docs, labels, strict=True)
        if category is not None
    ]
    if rows:
        session.execute(Decision.__table__.insert(), rows)


def get_document(store: Store, document_id: int) -> DocumentRow:
    """One document with its effective label. Raises NotFoundError."""
    rows = get_documents(store, [document_id])
    if not rows:
        raise NotFoundError("Document", document_id)
    return rows[0]


def document_sources(store: Store, corpus_id: int) -> dict[int, str]:
    """``{document id: source}`` of a corpus, without loading texts or labels (one narrow query)."""
    with store.session(readonly=True) as session:
        rows = session.execute(select(Document.id, Document.source).where(Document.corpus_id == corpus_id))
        return {int(i): src or "" for i, src in rows}


def get_documents(store: Store, document_ids: Sequence[int]) -> list[DocumentRow]:
    """Documents by id, in the order asked (unknown ids are left out)."""
    ids = [int(i) for i in document_ids]
    if not ids:
        return []
    with store.session(readonly=True) as session:
        corpus_ids = set(
            session.scalars(select(Document.corpus_id).where(Document.id.in_(ids)).distinct())
        )
        by_id: dict[int, DocumentRow] = {}
        for corpus_id in corpus_ids:
            stmt, _, _, _ = _document_select(corpus_id)
            names = _category_names(session, corpus_id)
            for doc, dec_cat, sug_cat in session.execute(stmt.where(Document.id.in_(ids))):
                by_id[doc.id] = _to_row(doc, dec_cat, sug_cat, names)
        return [by_id[i] for i in ids if i in by_id]


def source_chunks(store: Store, document_id: int) -> list[DocumentRow]:
    """All chunks cut from the same source document as this one (the document itself
    included), ordered by ``chunk_index``; just the document when it is not a chunk.
    Chunks share the corpus, ``source`` and ``chunk_of``. Raises NotFoundError."""
    with store.session(readonly=True) as session:
        doc = require(session, Document, document_id, "Document")
        if doc.chunk_of is None:
            ids = [doc.id]
        else:
            ids = list(
                session.scalars(
                    select(Document.id)
                    .where(
                        Document.corpus_id == doc.corpus_id,
                        Document.source == doc.source,
                        Document.chunk_of == doc.chunk_of,
                    )
                    .order_by(Document.chunk_index, Document.id)
                )
            )
    return get_documents(store, ids)


def list_documents(
    store: Store,
    corpus_id: int,
    *,
    category_id: int | None = None,
    unlabeled: bool = False,
    search: str | None = None,
    top_level_only: bool = False,
    offset: int = 0,
    limit: int | None = 50,
) -> DocumentPage:
    """A page of the corpus' documents ordered by id, each with its effective label.

    Filters: ``category_id`` (effective label is this category), ``unlabeled`` (no label at
    all), ``search`` (case-insensitive substring of title or text; bound LIKE with ``%``/``_``
    escaped), ``top_level_only`` (no chunks). ``limit=None`` returns every match.
    """
    if offset < 0 or (limit is not None and limit < 0):
        raise InvalidInputError("offset and limit must not be negative.")
    with store.session(readonly=True) as session:
        stmt, label_id, dec, sug = _document_select(corpus_id)
        if category_id is not None:
            stmt = stmt.where(label_id == category_id)
        if unlabeled:
            stmt = stmt.where(dec.category_id.is_(None), sug.category_id.is_(None))
        if search:
            pattern = like_pattern(search)
            stmt = stmt.where(
                or_(
                    Document.title.ilike(pattern, escape=LIKE_ESCAPE),
                    Document.text.ilike(pattern, escape=LIKE_ESCAPE),
                )
            )
        if top_level_only:
            stmt = stmt.where(Document.parent_id.is_(None))
        total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
        page = stmt.order_by(Document.id).offset(offset)
        if limit is not None:
            page = page.limit(limit)
        names = _category_names(session, corpus_id)
        items = [_to_row(doc, d, s, names) for doc, d, s in session.execute(page)]
        return DocumentPage(items=items, total=total, offset=offset, limit=limit)


def document_ids(store: Store, corpus_id: int, *, top_level_only: bool = False) -> list[int]:
    """Ids of the corpus' documents in ascending order."""
    with store.session(readonly=True) as session:
        stmt = select(Document.id).where(Document.corpus_id == corpus_id).order_by(Document.id)
        if top_level_only:
            stmt = stmt.where(Document.parent_id.is_(None))
        return list(session.scalars(stmt))


def update_document(
    store: Store,
    document_id: int,
    *,
    title: str | None = None,
    text: str | None = None,
    source: str | None = None,
    expected_version: int | None = None,
    editor: str | None = None,
) -> DocumentRow:
    """Edit a document's title/text/source. A text change re-hashes the document and bumps
    ``corpus.version`` (embeddings become stale), a title change ``corpus.updated_at`` (what caches of
    the corpus' titles are keyed on); a title or text change bumps the document's
    ``version``, so a label decision made on what was shown before is refused, and is recorded (what was edited,
    when, by ``editor`` when given) so that refusal names it. ``expected_version``:
    refuse the edit (VersionConflictError, naming the change) when the document changed since the caller loaded it.
    Raises NotFoundError, InvalidInputError (a blank new title or text), DuplicateError (the new text equals
    another document's)."""
    with store.session() as session:
        doc = require(session, Document, document_id, "Document")
        if expected_version is not None and doc.version != expected_version:
            raise version_conflict(session, document_id, expected_version)
        changed = False
        edited: list[str] = []
        if title is not None and title != doc.title:
            if not title.strip():
                raise InvalidInputError("A document's title must not be empty.")
            doc.title = title
            changed = True
            edited.append("title")
            # Not the documents' version (vectors embed the text only), but shown titles changed.
            session.execute(update(Corpus).where(Corpus.id == doc.corpus_id).values(updated_at=utcnow())
                            .execution_options(synchronize_session=False))
        if source is not None:
            doc.source = source
        if text is not None and text != doc.text:
            if not text.strip():
                raise InvalidInputError("A document's text must not be empty.")
            new_hash = sha256_hex(text)
            clash = session.scalar(
                select(Document.id).where(
                    Document.corpus_id == doc.corpus_id,
                    Document.content_hash == new_hash,
                    Document.id != document_id,
                )
            )
            if clash is not None:
                raise DuplicateError(f"Document {clash} already has exactly this text.")
            doc.text = text
            doc.content_hash = new_hash
            changed = True
            edited.append("text")
            session.flush()
            bump_documents_version(session, doc.corpus_id)
        if changed:
            doc.version += 1
            doc.edited, doc.edited_at, doc.edited_by = " and ".join(edited), utcnow(), editor or None
    return get_document(store, document_id)


@dataclass(frozen=True)
class DocumentDeletion:
    """What :func:`delete_document` did: the deleted document's title and the ids of the queries whose
    ground truth it was (now flagged)."""

    title: str
    flagged_queries: list[int]


def _ground_truth_query_ids(session: Session, document_id: int) -> list[int]:
    return list(session.scalars(select(QueryGroundTruth.query_id).where(QueryGroundTruth.document_id == document_id)
                                .order_by(QueryGroundTruth.query_id)))


def ground_truth_queries(store: Store, document_id: int) -> list[int]:
    """Ids of the queries (any query set) that have ``document_id`` in their ground truth."""
    with store.session(readonly=True) as session:
        return _ground_truth_query_ids(session, document_id)


def delete_document(store: Store, document_id: int, *, expected_version: int | None = None) -> DocumentDeletion:
    """Delete one document (with its chunks, labels and vectors) in one transaction. Queries whose
    ground truth held it lose it and are flagged, their ``error`` naming the deleted document, so a
    reviewer sees why their aspects no longer match. ``expected_version``: refuse (VersionConflictError)
    when the document changed since the caller loaded it. Bumps ``corpus.version``. Raises NotFoundError."""
    with store.session() as session:
        doc = require(session, Document, document_id, "Document")
        if expected_version is not None and doc.version != expected_version:
            raise version_conflict(session, document_id, expected_version)
        title, corpus_id = doc.title, doc.corpus_id
        queries = _ground_truth_query_ids(session, document_id)
        note = f"ground-truth document {title or '#' + str(document_id)!r} (#{document_id}) was deleted"
        for query in session.scalars(select(Query).where(Query.id.in_(queries))):
            query.error = f"{query.error}; {note}" if query.error else note
            if query.status == "ok":
                query.status = "flagged"
        session.execute(delete(Document).where(Document.id == document_id).execution_options(synchronize_session=False))
        bump_documents_version(session, corpus_id)
    return DocumentDeletion(title, queries)


def delete_documents(store: Store, corpus_id: int, document_ids: Sequence[int]) -> int:
    """Delete documents of this corpus (with their chunks, labels, vectors, ground-truth
    links); returns how many listed ids were deleted. Bumps ``corpus.version`` if any."""
    ids = [int(i) for i in document_ids]
    if not ids:
        return 0
    with store.session() as session:
        require(session, Corpus, corpus_id, "Corpus")
        result = session.execute(
            delete(Document)
            .where(Document.corpus_id == corpus_id, Document.id.in_(ids))
            .execution_options(synchronize_session=False)
        )
        deleted = int(result.rowcount or 0)  # type: ignore[attr-defined]
        if deleted:
            bump_documents_version(session, corpus_id)
        return deleted
