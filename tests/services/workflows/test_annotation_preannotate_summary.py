"""Pre-annotation's summary: ``remaining`` counts what the next run asks for (never sent, and failed ones, which
are asked again: todo - ok), as the page's Resume button does; it counted only the documents never sent, so the
page said '2 documents left' beside '3 of 3 still need a suggestion'. Failures name their document by title,
with its id in brackets (they said 'document 4007: ...')."""

from __future__ import annotations

import threading

import numpy as np

import db
from services.workflows import annotation as aw


def _embed(texts: list[str]) -> np.ndarray:
    """[sport-ness, cooking-ness, bias]; a text with 'zero' embeds as zeros (its suggestion fails)."""
    return np.asarray([[0.0, 0.0, 0.0] if "zero" in t.lower() else
                       [t.lower().count("match"), t.lower().count("pasta"), 0.1] for t in texts])


def _corpus(store: db.Store) -> tuple[db.CorpusInfo, list[int]]:
    corpus = db.create_corpus(store, "Mixed")
    db.add_categories(store, corpus.id, [{"name": "sport", "description": "match"},
                                         {"name": "cooking", "description": "pasta"}])
    ids = db.add_documents(store, corpus.id, [
        {"title": "*Zero*  <b>x</b>", "text": "zero"},
        {"title": "Final", "text": "The match ended."},
        {"title": "", "text": "A zero again."},
        {"title": "Dinner", "text": "Pasta tonight."},
        {"title": "Cup", "text": "Another match."},
    ]).document_ids
    return corpus, ids


def test_remaining_counts_failed_documents_that_resume_asks_again(store: db.Store) -> None:
    corpus, ids = _corpus(store)
    cancel = threading.Event()
    annotator = aw.ZeroShotAnnotator(_embed, "kw")

    def progress(done: int, total: int) -> None:
        if done >= 2:
            cancel.set()  # after the first batch of 2: one failed, one ok; 3 never sent

    first = aw.preannotate(store, corpus.id, annotator, batch_size=2, progress=progress, cancel=cancel)
    assert (first.todo, first.ok, first.failed, first.cancelled) == (5, 1, 1, True)
    assert first.remaining == 4  # 3 never sent + the failed one (it was 3)
    agent, version = annotator.agent, annotator.model_version
    assert len(db.documents_without_suggestion(store, corpus.id, agent, version)) == first.remaining
    assert first.errors == [f"document '*Zero* <b>x</b>' (id {ids[0]}): the document embedding is all zeros or not "
                            "finite (empty text?)"]

    second = aw.preannotate(store, corpus.id, annotator, batch_size=2)
    assert (second.todo, second.ok, second.failed, second.remaining) == (first.remaining, 2, 2, 2)
    assert second.errors[1] == f"document {ids[2]}: the document embedding is all zeros or not finite (empty text?)"

    once = aw.preannotate(store, corpus.id, annotator, retry_failed=False)  # failed ones are not asked again
    assert (once.todo, once.remaining) == (0, 0)


def test_document_name() -> None:
    assert aw.document_name("Rome", 12) == "document 'Rome' (id 12)"
    assert aw.document_name("  It's\n here ", 3) == "document \"It's here\" (id 3)"
    assert aw.document_name("", 4007) == "document 4007"
