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

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import aliased

from db.models import Decision, Document, Suggestion


@dataclass(frozen=True)
class LatestJoin:
    """An alias of the label table and the ON clause selecting each document's latest row."""

    row: Any
    on: ColumnElement[bool]


def latest_decision() -> LatestJoin:
    """Join target for the latest human decision of ``documents.id``."""
    alias = aliased(Decision, name="latest_decision")
    latest_id = (
        select(func.max(Decision.id))
        .where(Decision.document_id == Document.id)
        .correlate(Document)
        .scalar_subquery()
    )
    return LatestJoin(alias, alias.id == latest_id)


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
