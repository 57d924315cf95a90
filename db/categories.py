"""Categories of a corpus: add, list, rename; what uses one; delete or merge one with its labels.

Every change bumps ``corpus.labels_version`` (see :mod:`db.corpora` for the versioning contract).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from db._common import name_order, require
from db._labels import latest_decision, latest_suggestion
from db.corpora import _clean_name, bump_labels_version
from db.engine import Store
from db.errors import DuplicateError, InvalidInputError, StoreError
from db.liveness import LeaseRef, refuse_while_leased
from db.models import (
    Category,
    Corpus,
    Decision,
    Document,
    EvalRun,
    Query,
    QueryGroundTruth,
    QuerySet,
    Suggestion,
)


@dataclass(frozen=True)
class CategoryInfo:
    """A category of a corpus."""

    id: int
    corpus_id: int
    name: str
    description: str


def _category_info(category: Category) -> CategoryInfo:
    return CategoryInfo(
        id=category.id,
        corpus_id=category.corpus_id,
        name=category.name,
        description=category.description,
    )


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
