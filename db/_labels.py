"""SQL building blocks for "latest suggestion" / "latest decision" per document (internal).

"Latest" means the row with the highest id for the document (ids grow with insertion, so
this is insertion order and never ties, unlike timestamps).

Both are expressed as an aliased table plus an ON clause with a correlated
``max(id) WHERE document_id = documents.id`` subquery, to be LEFT OUTER JOINed to
``documents``: each lookup is one index probe, which keeps list views fast on 10k+ docs
(an ``IN (SELECT max(id) ... GROUP BY)`` form was re-evaluated per row by SQLite).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session, aliased

from db.errors import NotFoundError, VersionConflictError
from db.models import Category, Decision, Document, Suggestion


@dataclass(frozen=True)
class LatestJoin:
    """An alias of the label table and the ON clause selecting each document's latest row."""

    row: Any
    on: ColumnElement[bool]


def latest_decision(annotator: str | None = None) -> LatestJoin:
    """Join target for the decision that gives ``documents.id`` its label: its latest decision, leaving out
    blind decisions (a team annotator's, :class:`db.models.Decision`) newer than its latest adjudication (an
    adjudicated label stands until someone changes the shared label; an annotator revising their own label does
    not undo it). With ``annotator``: that annotator's latest *blind* decision (what they labelled it, blind)."""
    alias = aliased(Decision, name="latest_decision")
    inner = select(func.max(Decision.id)).where(Decision.document_id == Document.id)
    if annotator is not None:
        inner = inner.where(Decision.annotator == annotator, Decision.blind.is_(True))
    else:
        adjudication = aliased(Decision, name="adjudication")
        adjudicated = (select(func.max(adjudication.id))
                       .where(adjudication.document_id == Document.id, adjudication.method == "adjudication")
                       .correlate(Document).scalar_subquery())  # NULL: never adjudicated, every decision counts
        inner = inner.where(or_(Decision.blind.is_(False), Decision.id < func.coalesce(adjudicated, Decision.id + 1)))
    return LatestJoin(alias, alias.id == inner.correlate(Document).scalar_subquery())


def latest_suggestion(agent: str | None = None, model_version: str | None = None) -> LatestJoin:
    """Join target for the latest *ok* suggestion of ``documents.id`` (optionally only from
    ``agent`` / ``model_version``)."""
    alias = aliased(Suggestion, name="latest_suggestion")
    inner = select(func.max(Suggestion.id)).where(
        Suggestion.document_id == Document.id, Suggestion.status == "ok"
    )
    if agent is not None:
        inner = inner.where(Suggestion.agent == agent)
    if model_version is not None:
        inner = inner.where(Suggestion.model_version == model_version)
    return LatestJoin(alias, alias.id == inner.correlate(Document).scalar_subquery())


def version_conflict(session: Session, document_id: int, expected: int) -> VersionConflictError:
    """The error for a change based on version ``expected`` of a document that is at another version now, naming
    the change that made the current version: the latest label decision when it did (its ``based_on_version``
    is one less than the current version: each decision and each edit adds one), else the latest recorded edit of
    the title or text (``documents.edited``), else no one. Raises NotFoundError when the document is gone."""
    doc = session.execute(select(Document.version, Document.edited, Document.edited_at, Document.edited_by)
                          .where(Document.id == document_id)).first()
    if doc is None:
        raise NotFoundError("Document", document_id)
    last = session.execute(
        select(Decision.annotator, Decision.created_at, Decision.based_on_version, Category.name)
        .join(Category, Category.id == Decision.category_id)
        .where(Decision.document_id == document_id, Decision.blind.is_(False))  # blind ones move no version
        .order_by(Decision.id.desc())
        .limit(1)
    ).first()
    if last is not None and last.based_on_version + 1 == doc.version:
        return VersionConflictError(document_id, expected, doc.version, last.annotator, last.created_at,
                                    change=f"labelled {last.name!r} by {last.annotator!r}")
    if doc.edited:
        by = f" by {doc.edited_by!r}" if doc.edited_by else ""
        return VersionConflictError(document_id, expected, doc.version, doc.edited_by, doc.edited_at,
                                    change=f"its {doc.edited} {'were' if ' and ' in doc.edited else 'was'} "
                                           f"edited{by}")
    return VersionConflictError(document_id, expected, doc.version)
