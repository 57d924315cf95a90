"""What the Annotate and Review page reads and decides in the store: the review queue, the annotators'
suggestions still to make, the decided labels and their agreement with the suggestions."""

from __future__ import annotations

import db

__all__ = [
    "review_queue",
    "undecided_documents",
    "suggestion_agents",
    "documents_without_suggestion",
    "decide_label",
    "agreement",
]


# --------------------------------------------------------------------------- the store, for the pages


def review_queue(
    store: db.Store,
    corpus_id: int,
    *,
    category_id: int | None = None,
    agent: str | None = None,
    model_version: str | None = None,
    max_score: float | None = None,
    disagreement: bool = False,
    unreviewed: bool = False,
    limit: int | None = None,
    annotator: str | None = None,
) -> list[int]:
    """The ids of the documents to review, in queue order, by the filters given (:func:`db.review_queue`;
    ``annotator``: a team member's own queue, their assigned documents, judged by their own blind labels)."""
    return db.review_queue(
        store,
        corpus_id,
        category_id=category_id,
        agent=agent,
        model_version=model_version,
        max_score=max_score,
        disagreement=disagreement,
        unreviewed=unreviewed,
        limit=limit,
        annotator=annotator,
    )


def undecided_documents(store: db.Store, corpus_id: int) -> int:
    """How many documents of a corpus have no decided label (:func:`db.undecided_documents`)."""
    return db.undecided_documents(store, corpus_id)


def suggestion_agents(store: db.Store, corpus_id: int) -> list[db.AgentInfo]:
    """The annotators (agent, model version) that suggested labels in a corpus (:func:`db.suggestion_agents`)."""
    return db.suggestion_agents(store, corpus_id)


def documents_without_suggestion(
    store: db.Store,
    corpus_id: int,
    agent: str,
    model_version: str = "",
    *,
    retry_failed: bool = True,
    undecided_only: bool = False,
) -> list[int]:
    """The ids of the documents an annotator has not suggested a label for yet
    (:func:`db.documents_without_suggestion`)."""
    return db.documents_without_suggestion(
        store,
        corpus_id,
        agent,
        model_version,
        retry_failed=retry_failed,
        undecided_only=undecided_only,
    )


def decide_label(
    store: db.Store,
    document_id: int,
    category_id: int,
    annotator: str,
    expected_version: int,
    suggestion_id: int | None = None,
    note: str = "",
    *,
    blind: bool = False,
) -> int:
    """Decide a document's label (``expected_version`` guards against a stale decision) (:func:`db.decide_label`;
    ``blind``: a team member's own label, kept apart from the others' until adjudication)."""
    return db.decide_label(store, document_id, category_id, annotator, expected_version, suggestion_id, note,
                           blind=blind)


def agreement(
    store: db.Store,
    corpus_id: int,
    *,
    agent: str | None = None,
    model_version: str | None = None,
) -> db.Agreement:
    """How often the suggestions agree with the decided labels (:func:`db.agreement`)."""
    return db.agreement(store, corpus_id, agent=agent, model_version=model_version)
