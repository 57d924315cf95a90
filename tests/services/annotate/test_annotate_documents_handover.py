"""``annotate_documents`` hands each document's suggestion to ``on_suggestion`` before the ``progress`` call that
counts it, so a caller keeps every document ``progress`` announced even when that call raises; ``progress``
counts only documents with a suggestion (it counted the ones a cancel dropped too, so a stopped run's bar
reached the end). Against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from typing import Callable

import pytest

from services.annotate.llm_annotator import annotate_documents
from services.annotate.types import AnnotationDoc, CategorySpec, Suggestion
from services.llm.client import LLMClient
from tests.support.openai_server import FakeOpenAIServer, Reply, fake_openai

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]
CATEGORIES = [CategorySpec("Sports"), CategorySpec("Finance")]
GOOD = json.dumps({"label": "Sports", "confidence": 0.9, "reason": "a match"})
DOCS = [AnnotationDoc(key=10 + i, title=f"t{i}", text="a match report") for i in range(5)]


class Stopped(BaseException):
    """Stands for Streamlit's StopException raised inside a progress widget call."""


def test_each_suggestion_is_handed_over_before_the_progress_call_that_counts_it(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.ok(GOOD))
    events: list[tuple[str, int]] = []

    def progress(done: int, total: int) -> None:
        events.append(("progress", done))
        if done == 2:
            raise Stopped

    def handed(suggestion: Suggestion) -> None:
        events.append(("suggestion", int(suggestion.document_key)))

    client = LLMClient(server.llm_config(max_retries=0))
    with pytest.raises(Stopped):
        annotate_documents(client, DOCS, CATEGORIES, limit=1, progress=progress, on_suggestion=handed)
    assert events == [("suggestion", 10), ("progress", 1), ("suggestion", 11), ("progress", 2)]


def test_progress_does_not_count_the_documents_a_cancel_dropped(fake_openai: Factory) -> None:
    cancel = threading.Event()
    server = fake_openai(lambda body: GOOD)
    ticks: list[tuple[int, int]] = []
    handed: list[Suggestion] = []

    def hand(suggestion: Suggestion) -> None:
        handed.append(suggestion)
        cancel.set()  # the user stops the run as the first suggestion comes in (not while it is asked: a cancel
        # then may drop that answer too, which is right, but makes the count depend on which came first)

    client = LLMClient(server.llm_config(max_retries=0))
    result = annotate_documents(client, DOCS, CATEGORIES, limit=1, cancel=cancel,
                                progress=lambda d, t: ticks.append((d, t)), on_suggestion=hand)
    assert [s.document_key for s in result] == [10] and handed == result
    assert ticks == [(1, 5)]  # it went on to (5, 5): the bar said 5 of 5 annotated, 1 was
    assert len(server.requests) == 1
