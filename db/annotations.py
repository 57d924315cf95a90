"""Labels: machine suggestions, human decisions (optimistic locking), review queue,
effective labels and suggestion-vs-decision agreement.

Contracts:
- Suggestions and decisions are append-only histories; the *latest* row (highest id) of a
  document wins. Only ``status == "ok"`` suggestions carry a label; ``"failed"`` ones
  record an error and have no category.
- A decision is accepted only if the document's ``version`` still equals the version the
  annotator saw (``expected_version``); the check and the bump are one conditional UPDATE,
  so two annotators can never both win. The loser gets :class:`VersionConflictError`.
- Every change here bumps the corpus' ``labels_version``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import and_, case, func, or_, select, update
from sqlalchemy.orm import Session

from db._common import name_order, require
from db._labels import latest_decision, latest_suggestion, version_conflict
from db.corpora import bump_labels_version
from db.engine import Store
from db.errors import InvalidInputError, NotFoundError, VersionConflictError
from db.models import Category, Decision, Document, Suggestion, utcnow

SUGGESTION_STATUSES = ("ok", "failed")


@dataclass(frozen=True)
class SuggestionRow:
    """A stored suggestion (``category`` is the category name, None when failed)."""

    id: int
    document_id: int
    category_id: int | None
    category: str | None
    status: str
    agent: str
    model_version: str
    score: float | None
    reason: str
    error: str
    created_at: datetime


@dataclass(frozen=True)
class AgentInfo:
    """A suggestion agent of a corpus: name, model version and how many suggestions it made
    (``n_failed`` of them failed)."""

    agent: str
    model_version: str
    n_suggestions: int
    n_failed: int


@dataclass(frozen=True)
class DecisionRow:
    """A stored human decision."""

    id: int
    document_id: int
    category_id: int
    category: str
    annotator: str
    created_at: datetime
    based_on_version: int
    suggestion_id: int | None
    note: str


@dataclass(frozen=True)
class DecisionIn:
    """One label decision to make: set ``category_id`` on a document seen at ``expected_version``."""

    document_id: int
    category_id: int
    expected_version: int
    suggestion_id: int | None = None
    note: str = ""


@dataclass(frozen=True)
class BulkDecisionResult:
    """Outcome of a bulk decision: new version per decided document, and refused ones."""

    new_versions: dict[int, int]
    conflicts: list[VersionConflictError] = field(default_factory=list)


@dataclass(frozen=True)
class EffectiveLabel:
    """The label a document currently has: ``source`` is ``"decision"`` or ``"suggestion"``;
    ``by`` is the annotator or the agent."""

    document_id: int
    category_id: int
    category: str
    source: Literal["decision", "suggestion"]
    by: str


@dataclass(frozen=True)
class CategoryAgreement:
    """Of ``n`` documents humans put in this category, ``n_agree`` had it suggested."""

    category_id: int
    category: str
    n: int
    n_agree: int

    @property
    def accuracy(self) -> float | None:
        """n_agree / n, None when no document was decided into this category."""
        return self.n_agree / self.n if self.n else None


@dataclass(frozen=True)
class Agreement:
    """Latest ok suggestion vs latest decision over documents that have both.

    ``per_category`` is keyed by the *decided* category name (every category of the corpus
    is present); ``confusion[suggested][decided]`` counts documents; ``pairs`` lists the
    same counts as (suggested, decided, count) sorted by names.
    """

    n: int
    n_agree: int
    per_category: dict[str, CategoryAgreement]
    confusion: dict[str, dict[str, int]]
    pairs: list[tuple[str, str, int]]

    @property
    def accuracy(self) -> float | None:
        """Overall agreement rate, None when nothing can be compared."""
        return self.n_agree / self.n if self.n else None


# --------------------------------------------------------------------------- suggestions


def add_suggestions(store: Store, suggestions: Sequence[Mapping[str, Any]]) -> list[int]:
    """Store many suggestions in one transaction; returns their ids in input order.

    Each mapping has ``document_id``, ``agent`` and either ``category_id`` or ``category``
    (a name in the document's corpus) for ``status="ok"`` (the default when a category is
    given), or no category with ``status="failed"`` (the default otherwise) and an
    ``error``. Optional: ``model_version``, ``score``, ``reason``.

    Raises InvalidInputError (names the item) or NotFoundError; nothing is stored then.
    """
    if not suggestions:
        return []
    with store.session() as session:
        doc_ids = {int(s["document_id"]) for s in suggestions if "document_id" in s}
        doc_corpus = dict(
            session.execute(
                select(Document.id, Document.corpus_id).where(Document.id.in_(doc_ids))
            ).all()
        )
        corpus_ids = set(doc_corpus.values())
        cats_by_id: dict[int, Category] = {}
        cats_by_name: dict[tuple[int, str], Category] = {}
        for cat in session.scalars(select(Category).where(Category.corpus_id.in_(corpus_ids))):
            cats_by_id[cat.id] = cat
            cats_by_name[(cat.corpus_id, cat.name)] = cat
        now = utcnow()
        rows: list[dict[str, Any]] = []
        for index, item in enumerate(suggestions):
            where = f"Suggestion #{index + 1}"
            if "document_id" not in item:
                raise InvalidInputError(f"{where} has no document_id.")
            document_id = int(item["document_id"])
            corpus_id = doc_corpus.get(document_id)
            if corpus_id is None:
                raise NotFoundError("Document", document_id)
            agent = str(item.get("agent") or "").strip()
            if not agent:
                raise InvalidInputError(f"{where} has no agent.")
            category_id = item.get("category_id")
            if category_id is None and item.get("category") is not None:
                cat = cats_by_name.get((corpus_id, str(item["category"]).strip()))
                if cat is None:
                    raise InvalidInputError(
                        f"{where}: {item['category']!r} is not a category of the document's corpus."
                    )
                category_id = cat.id
            status = item.get("status") or ("ok" if category_id is not None else "failed")
            if status not in SUGGESTION_STATUSES:
                raise InvalidInputError(f"{where}: status must be 'ok' or 'failed', not {status!r}.")
            if status == "ok":
                if category_id is None:
                    raise InvalidInputError(f"{where} has status 'ok' but no category.")
                cat = cats_by_id.get(int(category_id))
                if cat is None or cat.corpus_id != corpus_id:
                    raise InvalidInputError(
                        f"{where}: category {category_id} is not a category of the document's corpus."
                    )
            elif category_id is not None:
                raise InvalidInputError(f"{where} has status 'failed' but a category.")
            score = item.get("score")
            rows.append(
                {
                    "document_id": document_id,
                    "category_id": int(category_id) if category_id is not None else None,
                    "status": status,
                    "agent": agent,
                    "model_version": str(item.get("model_version") or ""),
                    "score": float(score) if score is not None else None,
                    "reason": str(item.get("reason") or ""),
                    "error": str(item.get("error") or ""),
                    "created_at": now,
                }
            )
        objects = [Suggestion(**row) for row in rows]
        session.add_all(objects)
        session.flush()  # batched INSERT (with RETURNING where the database supports it)
        for corpus_id in corpus_ids:
            bump_labels_version(session, corpus_id)
        return [o.id for o in objects]


def documents_without_suggestion(
    store: Store,
    corpus_id: int,
    agent: str,
    model_version: str = "",
    *,
    retry_failed: bool = True,
    undecided_only: bool = False,
) -> list[int]:
    """Ids (ascending) of the corpus' documents that still need a suggestion from
    ``agent``/``model_version``: those without one, and (``retry_failed``) those whose
    suggestions from it all failed; with ``undecided_only`` only documents without any label
    decision (human or imported). Use to resume an interrupted pre-annotation."""
    done = select(Suggestion.document_id).where(
        Suggestion.agent == agent, Suggestion.model_version == model_version
    )
    if retry_failed:
        done = done.where(Suggestion.status == "ok")
    stmt = select(Document.id).where(Document.corpus_id == corpus_id, Document.id.not_in(done))
    if undecided_only:
        stmt = stmt.where(Document.id.not_in(select(Decision.document_id)))
    with store.session(readonly=True) as session:
        return list(session.scalars(stmt.order_by(Document.id)))


def undecided_documents(store: Store, corpus_id: int) -> int:
    """How many of the corpus' documents have no label decision (human or imported) yet."""
    with store.session(readonly=True) as session:
        return int(session.scalar(
            select(func.count()).select_from(Document).where(
                Document.corpus_id == corpus_id, Document.id.not_in(select(Decision.document_id)))
        ) or 0)


def suggestion_agents(store: Store, corpus_id: int) -> list[AgentInfo]:
    """The distinct (agent, model version) pairs that made suggestions on the corpus'
    documents, with their counts, ordered by agent then model version (one GROUP BY, no
    scan of the suggestions in Python). Empty for an unknown corpus."""
    failed = func.sum(case((Suggestion.status == "failed", 1), else_=0))
    stmt = (
        select(Suggestion.agent, Suggestion.model_version, func.count(), failed)
        .join(Document, Document.id == Suggestion.document_id)
        .where(Document.corpus_id == corpus_id)
        .group_by(Suggestion.agent, Suggestion.model_version)
        .order_by(Suggestion.agent, Suggestion.model_version)
    )
    with store.session(readonly=True) as session:
        return [
            AgentInfo(agent=a, model_version=v, n_suggestions=int(n), n_failed=int(f or 0))
            for a, v, n, f in session.execute(stmt)
        ]


def list_suggestions(store: Store, document_id: int) -> list[SuggestionRow]:
    """Suggestion history of a document, oldest first."""
    with store.session(readonly=True) as session:
        rows = session.execute(
            select(Suggestion, Category.name)
            .outerjoin(Category, Category.id == Suggestion.category_id)
            .where(Suggestion.document_id == document_id)
            .order_by(Suggestion.id)
        ).all()
        return [
            SuggestionRow(
                id=s.id,
                document_id=s.document_id,
                category_id=s.category_id,
                category=name,
                status=s.status,
                agent=s.agent,
                model_version=s.model_version,
                score=s.score,
                reason=s.reason,
                error=s.error,
                created_at=s.created_at,
            )
            for s, name in rows
        ]


# --------------------------------------------------------------------------- decisions


def _decide_many(
    session: Session,
    items: Sequence[DecisionIn],
    annotator: str,
    on_conflict: Literal["raise", "skip"],
) -> BulkDecisionResult:
    annotator = (annotator or "").strip()
    if not annotator:
        raise InvalidInputError("A decision needs the annotator's name.")
    if on_conflict not in ("raise", "skip"):
        raise InvalidInputError("on_conflict must be 'raise' or 'skip'.")
    new_versions: dict[int, int] = {}
    conflicts: list[VersionConflictError] = []
    touched: set[int] = set()
    now = utcnow()
    for item in items:
        doc = session.execute(
            select(Document.corpus_id).where(Document.id == item.document_id)
        ).first()
        if doc is None:
            raise NotFoundError("Document", item.document_id)
        corpus_id = doc[0]
        category = session.get(Category, item.category_id)
        if category is None or category.corpus_id != corpus_id:
            raise InvalidInputError(
                f"Category {item.category_id} is not a category of "
                f"document {item.document_id}'s corpus."
            )
        if item.suggestion_id is not None:
            sug = session.get(Suggestion, item.suggestion_id)
            if sug is None or sug.document_id != item.document_id:
                raise InvalidInputError(
                    f"Suggestion {item.suggestion_id} is not a suggestion for "
                    f"document {item.document_id}."
                )
        result = session.execute(
            update(Document)
            .where(Document.id == item.document_id, Document.version == item.expected_version)
            .values(version=Document.version + 1)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            error = version_conflict(session, item.document_id, item.expected_version)
            if on_conflict == "raise":
                raise error
            conflicts.append(error)
            continue
        session.add(
            Decision(
                document_id=item.document_id,
                category_id=item.category_id,
                annotator=annotator,
                created_at=now,
                based_on_version=item.expected_version,
                suggestion_id=item.suggestion_id,
                note=item.note or "",
            )
        )
        new_versions[item.document_id] = item.expected_version + 1
        touched.add(corpus_id)
    session.flush()
    for corpus_id in touched:
        bump_labels_version(session, corpus_id)
    return BulkDecisionResult(new_versions=new_versions, conflicts=conflicts)


def decide_label(
    store: Store,
    document_id: int,
    category_id: int,
    annotator: str,
    expected_version: int,
    suggestion_id: int | None = None,
    note: str = "",
) -> int:
    """Record a human label decision and return the document's new version.

    Raises:
        VersionConflictError: the document is no longer at ``expected_version`` (someone
            else decided meanwhile); nothing is stored. Reload and retry.
        NotFoundError: unknown document.
        InvalidInputError: category of another corpus, suggestion of another document.
    """
    item = DecisionIn(document_id, category_id, expected_version, suggestion_id, note)
    with store.session() as session:
        result = _decide_many(session, [item], annotator, "raise")
    return result.new_versions[document_id]


def decide_labels(
    store: Store,
    items: Sequence[DecisionIn],
    annotator: str,
    *,
    on_conflict: Literal["raise", "skip"] = "raise",
) -> BulkDecisionResult:
    """Many decisions in one transaction. ``on_conflict="raise"``: any conflict stores
    nothing and raises VersionConflictError; ``"skip"``: conflicting documents are left out
    and reported in ``conflicts``, the others are stored."""
    with store.session() as session:
        return _decide_many(session, items, annotator, on_conflict)


def accept_suggestions(
    store: Store,
    accepts: Sequence[tuple[int, int]],
    annotator: str,
    *,
    on_conflict: Literal["raise", "skip"] = "raise",
) -> BulkDecisionResult:
    """Accept suggestions as decisions in one transaction. ``accepts`` holds
    ``(suggestion_id, expected_version_of_its_document)`` pairs. Failed suggestions cannot be
    accepted (InvalidInputError). Conflicts behave as in :func:`decide_labels`."""
    with store.session() as session:
        items: list[DecisionIn] = []
        for suggestion_id, expected in accepts:
            sug = require(session, Suggestion, suggestion_id, "Suggestion")
            if sug.status != "ok" or sug.category_id is None:
                raise InvalidInputError(
                    f"Suggestion {suggestion_id} failed and has no label to accept."
                )
            items.append(DecisionIn(sug.document_id, sug.category_id, expected, sug.id))
        return _decide_many(session, items, annotator, on_conflict)


def list_decisions(store: Store, document_id: int) -> list[DecisionRow]:
    """Decision history of a document, oldest first."""
    with store.session(readonly=True) as session:
        rows = session.execute(
            select(Decision, Category.name)
            .join(Category, Category.id == Decision.category_id)
            .where(Decision.document_id == document_id)
            .order_by(Decision.id)
        ).all()
        return [
            DecisionRow(
                id=d.id,
                document_id=d.document_id,
                category_id=d.category_id,
                category=name,
                annotator=d.annotator,
                created_at=d.created_at,
                based_on_version=d.based_on_version,
                suggestion_id=d.suggestion_id,
                note=d.note,
            )
            for d, name in rows
        ]


# --------------------------------------------------------------------------- labels & review


def effective_labels(store: Store, corpus_id: int) -> dict[int, EffectiveLabel]:
    """Current label of every labelled document of the corpus: its latest human decision,
    else its latest ok suggestion. Unlabelled documents are absent."""
    with store.session(readonly=True) as session:
        dj, sj = latest_decision(), latest_suggestion()
        dec, sug = dj.row, sj.row
        rows = session.execute(
            select(
                Document.id,
                dec.category_id,
                dec.annotator,
                sug.category_id,
                sug.agent,
            )
            .select_from(Document)
            .outerjoin(dec, dj.on)
            .outerjoin(sug, sj.on)
            .where(Document.corpus_id == corpus_id)
            .where(or_(dec.category_id.is_not(None), sug.category_id.is_not(None)))
            .order_by(Document.id)
        ).all()
        names = dict(
            session.execute(
                select(Category.id, Category.name).where(Category.corpus_id == corpus_id)
            ).all()
        )
    out: dict[int, EffectiveLabel] = {}
    for doc_id, dec_cat, annotator, sug_cat, agent in rows:
        if dec_cat is not None:
            out[doc_id] = EffectiveLabel(doc_id, dec_cat, names[dec_cat], "decision", annotator)
        else:
            out[doc_id] = EffectiveLabel(doc_id, sug_cat, names[sug_cat], "suggestion", agent)
    return out


def effective_label(store: Store, document_id: int) -> EffectiveLabel | None:
    """Current label of one document (see :func:`effective_labels`). Raises NotFoundError."""
    with store.session(readonly=True) as session:
        corpus_id = require(session, Document, document_id, "Document").corpus_id
    return effective_labels(store, corpus_id).get(document_id)


def category_counts(store: Store, corpus_id: int) -> dict[str, int]:
    """Number of documents per effective label name (every category present, maybe 0)."""
    labels = effective_labels(store, corpus_id)
    with store.session(readonly=True) as session:
        names = session.scalars(select(Category.name).where(Category.corpus_id == corpus_id)).all()
        counts = {name: 0 for name in sorted(names, key=name_order)}
    for label in labels.values():
        counts[label.category] = counts.get(label.category, 0) + 1
    return counts


def review_queue(
    store: Store,
    corpus_id: int,
    *,
    category_id: int | None = None,
    agent: str | None = None,
    model_version: str | None = None,
    max_score: float | None = None,
    disagreement: bool = False,
    unreviewed: bool = False,
    limit: int | None = None,
) -> list[int]:
    """Document ids to review, ascending by id (stable). All given filters must hold.

    "Suggestion" below means the document's latest ok suggestion (only from ``agent`` /
    ``model_version`` when given; then documents without one are excluded):

    - ``category_id``: the suggestion or the latest decision has this category;
    - ``max_score``: the suggestion's score is below ``max_score`` (no score: excluded);
    - ``disagreement``: both exist and their categories differ;
    - ``unreviewed``: the document has no human decision at all.
    """
    dj, sj = latest_decision(), latest_suggestion(agent, model_version)
    dec, sug = dj.row, sj.row
    stmt = (
        select(Document.id)
        .select_from(Document)
        .outerjoin(dec, dj.on)
        .outerjoin(sug, sj.on)
        .where(Document.corpus_id == corpus_id)
    )
    if agent is not None or model_version is not None:
        stmt = stmt.where(sug.id.is_not(None))
    if category_id is not None:
        stmt = stmt.where(or_(sug.category_id == category_id, dec.category_id == category_id))
    if max_score is not None:
        stmt = stmt.where(sug.score.is_not(None), sug.score < max_score)
    if disagreement:
        stmt = stmt.where(
            and_(
                dec.category_id.is_not(None),
                sug.category_id.is_not(None),
                dec.category_id != sug.category_id,
            )
        )
    if unreviewed:
        stmt = stmt.where(dec.id.is_(None))
    stmt = stmt.order_by(Document.id)
    if limit is not None:
        stmt = stmt.limit(limit)
    with store.session(readonly=True) as session:
        return list(session.scalars(stmt))


def agreement(
    store: Store, corpus_id: int, *, agent: str | None = None, model_version: str | None = None
) -> Agreement:
    """Compare each document's latest ok suggestion (optionally from ``agent`` /
    ``model_version``) with its latest human decision, over documents that have both."""
    dj, sj = latest_decision(), latest_suggestion(agent, model_version)
    dec, sug = dj.row, sj.row
    with store.session(readonly=True) as session:
        names = dict(
            session.execute(
                select(Category.id, Category.name).where(Category.corpus_id == corpus_id)
            ).all()
        )
        pairs_rows = session.execute(
            select(sug.category_id, dec.category_id, func.count())
            .select_from(Document)
            .join(dec, dj.on)
            .join(sug, sj.on)
            .where(Document.corpus_id == corpus_id)
            .group_by(sug.category_id, dec.category_id)
        ).all()
    per_category = {
        name: CategoryAgreement(cid, name, 0, 0)
        for cid, name in sorted(names.items(), key=lambda kv: kv[1])
    }
    confusion: dict[str, dict[str, int]] = {}
    pairs: list[tuple[str, str, int]] = []
    n = n_agree = 0
    for suggested_id, decided_id, count in pairs_rows:
        suggested, decided = names[suggested_id], names[decided_id]
        confusion.setdefault(suggested, {})[decided] = count
        pairs.append((suggested, decided, count))
        n += count
        before = per_category[decided]
        hit = count if suggested_id == decided_id else 0
        n_agree += hit
        per_category[decided] = CategoryAgreement(
            before.category_id, decided, before.n + count, before.n_agree + hit
        )
    pairs.sort()
    return Agreement(n=n, n_agree=n_agree, per_category=per_category, confusion=confusion, pairs=pairs)
