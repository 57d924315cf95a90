"""Pathological answers from a real local server: deeply nested brackets (json raised RecursionError, which the
flows did not catch: 'internal error: maximum recursion depth exceeded') and 200 KB of braces (each '{' tried
as the object's start cost a pass over the rest of the text: 7 s per parse, twice per document)."""

from __future__ import annotations

import time
from typing import Callable

from services.annotate import AnnotationDoc, CategorySpec, annotate_documents
from services.llm.cache import MemoryCache
from services.llm.client import LLMClient
from services.llm_strategies import expand_many
from tests.support.openai_server import FakeOpenAIServer, fake_openai

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]
NESTED = '[{"label": ' * 20_000
BRACES = '{"label": "' + "{" * 200_000
CATEGORIES = [CategorySpec("space"), CategorySpec("food")]


def _client(server: FakeOpenAIServer) -> LLMClient:
    return LLMClient(server.llm_config(max_retries=0), sleep=lambda s: None)


def test_nested_brackets_are_an_unusable_answer_not_an_internal_error(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: NESTED)
    (suggestion,) = annotate_documents(_client(server), [AnnotationDoc(1, "Moon", "The moon.")], CATEGORIES)
    assert suggestion.status == "failed" and suggestion.label is None
    assert suggestion.error.startswith("parse: no usable answer in 3 tries (the first prompt: answer contains a JSON "
                                       "object that is cut off or malformed")
    (outcome,) = expand_many(_client(server), "intent", ["moon and mars?"], cache=MemoryCache())
    assert not outcome.ok and (outcome.error or "").startswith("unusable LLM answer: The LLM answer contains no "
                                                               "intent statements")


def test_a_200_kb_answer_of_braces_is_refused_quickly(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: BRACES)
    docs = [AnnotationDoc(i, f"Doc {i}", "text") for i in range(2)]
    started = time.perf_counter()
    suggestions = annotate_documents(_client(server), docs, CATEGORIES, limit=1)
    (outcome,) = expand_many(_client(server), "intent", ["moon and mars?"], cache=MemoryCache())
    elapsed = time.perf_counter() - started
    assert [s.status for s in suggestions] == ["failed", "failed"] and not outcome.ok
    # before: about 7 s a parse, 4 parses (28 s); now each document is asked 3 times and every answer is refused
    # at once: the bound leaves room for a slow machine or a coverage run's tracing
    assert elapsed < 10.0
