"""What a pre-annotation run says about itself, the same on the Annotate and Review page and in
``mrag-studio annotate``: why it stopped and what to do (:func:`stop_text`), its failures by cause
(:func:`failures_text`); and the offline zero-shot suggestion offered for the documents the LLM failed on
(:func:`zero_shot_fallback`), stored under an identity of its own so the review queue shows where it came from
(:func:`suggestion_source`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import db
from mrag_core.wording import counted
from services.annotate import AnnotationDoc, CategorySpec, zero_shot_identity
from services.annotate.types import validate_categories
from services.heartbeat import holding_lease
from services.llm.causes import CAUSES, advice, cause_of, describe
from services.llm.config import LLMConfig
from services.workflows.annotation import (
    PreannotateSummary,
    ZeroShotAnnotator,
    _suggestion_row,
    document_name,
    preannotation_lease,
)

__all__ = ["FALLBACK_MARK", "FallbackSummary", "failed_by", "failures_text", "fallback_identity", "fallback_offer",
           "stop_text",
           "suggestion_source", "zero_shot_fallback"]

#: Ends the ``model_version`` of an offline zero-shot suggestion made for a document the LLM failed on.
FALLBACK_MARK = "/fallback"


def stop_text(summary: PreannotateSummary, config: LLMConfig | None) -> str:
    """Why the endpoint stopped the run and what to do: ``"no answer in time (timeout): LLM request ... failed: no
    answer within 60 s (MRAG_LLM_TIMEOUT), 3 times (...). What to do: raise MRAG_LLM_TIMEOUT (now 60 s), ..."`` (the
    error as the stopped documents store it), ``""`` when the endpoint did not stop it."""
    if not summary.stop_error:
        return ""
    cause = summary.stop_cause or cause_of(summary.stop_error)
    what = f"{CAUSES[cause].what} ({cause})" if cause in CAUSES else "the endpoint failed"
    error = summary.stop_error.split(": ", 1)[1] if cause_of(summary.stop_error) else summary.stop_error
    todo = advice(cause, config)
    return f"{what}: {error.rstrip('.')}." + (f" What to do: {todo}." if todo else "")


def failures_text(summary: PreannotateSummary) -> str:
    """The run's stored failures by cause (``"30 no valid category in the answer (parse), 5 no answer in time
    (timeout)"``), ``""`` without failures."""
    return describe(summary.causes) if summary.failed else ""


def fallback_identity(model_name: str) -> tuple[str, str]:
    """``(agent, model_version)`` of the offline fallback: the zero-shot annotator's, its version marked with
    :data:`FALLBACK_MARK`."""
    agent, version = zero_shot_identity(model_name)
    return agent, version + FALLBACK_MARK


def suggestion_source(agent: str, model_version: str) -> str:
    """Where a suggestion came from, for the reviewer: ``"LLM"``, ``"offline zero-shot"``, or ``"offline zero-shot,
    for a document the LLM failed on"``."""
    if model_version.endswith(FALLBACK_MARK):
        return "offline zero-shot, for a document the LLM failed on"
    if agent.startswith("zero-shot:"):
        return "offline zero-shot"
    return "LLM" if agent.startswith("llm:") else agent


def failed_by(store: db.Store, corpus_id: int, agent: str, model_version: str, *, fallback: tuple[str, str] | None
              = None) -> list[int]:
    """Ids (ascending) of the corpus' documents whose every suggestion from ``agent`` / ``model_version`` failed
    (at least one, none ok); with ``fallback`` (an identity), less those that have an ok suggestion from it."""
    no_ok = db.documents_without_suggestion(store, corpus_id, agent, model_version, retry_failed=True)
    never = set(db.documents_without_suggestion(store, corpus_id, agent, model_version, retry_failed=False))
    ids = [i for i in no_ok if i not in never]
    if fallback is not None and ids:
        still = set(db.documents_without_suggestion(store, corpus_id, *fallback, retry_failed=True))
        ids = [i for i in ids if i in still]
    return ids


@dataclass(frozen=True)
class FallbackSummary:
    """Outcome of :func:`zero_shot_fallback`: ``todo`` documents the LLM had failed on, ``ok`` / ``failed`` zero-shot
    suggestions stored for them; ``errors``: the first failures, each naming its document."""

    todo: int
    ok: int
    failed: int
    errors: tuple[str, ...] = ()


def zero_shot_fallback(store: db.Store, corpus_id: int, llm_agent: str, llm_version: str,
                       annotator: ZeroShotAnnotator, *, cancel: threading.Event | None = None) -> FallbackSummary:
    """Suggest a category offline (``annotator``, zero-shot embedding similarity) for the corpus' documents whose
    every suggestion from the LLM ``llm_agent`` / ``llm_version`` failed (:func:`failed_by`), and store them in one
    transaction under :func:`fallback_identity` (so the review queue says where they came from:
    :func:`suggestion_source`), each reason saying which LLM failed and why. A document given one is not asked
    again; the LLM's own to-do list is unchanged (a later LLM run still asks for it, and its answer becomes the
    latest suggestion). Holds the corpus' pre-annotation lease (``db.RunInProgressError`` while another run holds
    it). Raises ``ValueError`` for unusable categories."""
    agent, version = annotator.agent, annotator.model_version + FALLBACK_MARK
    cancel = cancel if cancel is not None else threading.Event()
    with holding_lease(store, preannotation_lease(corpus_id), "Pre-annotation of corpus", corpus_id, cancel,
                       title=db.get_corpus(store, corpus_id).name):
        categories = [CategorySpec(c.name, c.description) for c in db.list_categories(store, corpus_id)]
        validate_categories(categories)
        by_name = {c.name: c for c in db.list_categories(store, corpus_id)}
        ids = failed_by(store, corpus_id, llm_agent, llm_version, fallback=(agent, version))
        if not ids:
            return FallbackSummary(0, 0, 0)
        documents = db.get_documents(store, ids)
        why = {}
        for doc_id in ids:
            failed = [s for s in db.list_suggestions(store, doc_id)
                      if (s.agent, s.model_version) == (llm_agent, llm_version)]
            why[doc_id] = cause_of(failed[-1].error) if failed else None
        suggestions = annotator.annotate([AnnotationDoc(d.id, d.title, d.text) for d in documents], categories,
                                         cancel=cancel)
        rows, errors = [], []
        for s in suggestions:
            row = _suggestion_row(s, by_name)
            cause = why.get(int(s.document_key))
            failed_how = f" ({cause}: {CAUSES[cause].what})" if cause in CAUSES else ""
            row.update(agent=agent, model_version=version,
                       reason=f"offline fallback, {llm_agent} failed on this document{failed_how}: {row['reason']}")
            rows.append(row)
            if row["status"] != "ok" and len(errors) < 5:
                title = next((d.title for d in documents if d.id == row["document_id"]), "")
                errors.append(f"{document_name(title, row['document_id'])}: {row['error']}")
        db.add_suggestions(store, rows)
    ok = sum(row["status"] == "ok" for row in rows)
    return FallbackSummary(len(ids), ok, len(rows) - ok, tuple(errors))


def fallback_offer(n: int) -> str:
    """The offer shown when the LLM failed on ``n`` documents."""
    return (f"The LLM failed on {counted(n, 'document')}: suggest a category for "
            f"{'it' if n == 1 else 'them'} offline (zero-shot embedding similarity), marked as such in the review "
            "queue.")
