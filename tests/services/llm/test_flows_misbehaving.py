"""The LLM-backed flows (reader, query generation, expansions, pre-annotation) against a real local server that
misbehaves: each ends in its own readable failure, never in a bare exception."""

from __future__ import annotations

from typing import Callable

import pytest

from services.annotate import AnnotationDoc, CategorySpec, annotate_documents
from services.llm.cache import MemoryCache
from services.llm.client import LLMClient
from services.llm_strategies import expand_many
from services.querygen.generate import generate_queries, regenerate_one
from services.querygen.sampling import QueryPlan
from services.reader import ReaderDoc, ReaderError, RemoteGenerator
from tests.support.mini_corpus import TWO_DOCS
from tests.support.openai_server import FakeOpenAIServer, Reply, fake_openai

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]
HTML = b"<html><body>Open WebUI</body></html>"
NOT_UTF8_GARBAGE = b"\xff\xfe\x00garbage"


DOCS = TWO_DOCS
PLAN = QueryPlan(2, ("1", "2"))


def _client(server: FakeOpenAIServer) -> LLMClient:
    return LLMClient(server.llm_config(max_retries=0), sleep=lambda s: None)


@pytest.mark.parametrize("raw", [HTML, NOT_UTF8_GARBAGE])
def test_reader_says_what_came_back_instead_of_raising_a_decode_error(fake_openai: Factory, raw: bytes) -> None:
    server = fake_openai(lambda body: Reply.body(raw))
    with pytest.raises(ReaderError, match="not JSON"):
        RemoteGenerator(_client(server), MemoryCache()).answer("What about the moon?", [ReaderDoc("Moon", "space",
                                                                                                 "The moon.")])


@pytest.mark.parametrize("raw", [HTML, NOT_UTF8_GARBAGE])
def test_query_regeneration_and_generation_fail_the_query_with_the_reason(fake_openai: Factory, raw: bytes) -> None:
    server = fake_openai(lambda body: Reply.body(raw))
    again = regenerate_one(PLAN, DOCS, client=_client(server))  # the Regenerate button: raised before
    assert again.status == "failed" and again.text is None and "not JSON" in (again.error or "")
    (made,) = generate_queries([PLAN], DOCS, client=_client(server))
    assert made.status == "failed" and "not JSON" in (made.error or "")


def test_expansions_and_annotation_name_the_body(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.body(HTML))
    for family in ("multi-query", "hyde", "intent"):
        (outcome,) = expand_many(_client(server), family, ["moon and mars?"], cache=MemoryCache())
        assert not outcome.ok and "not JSON ('<html><body>Open WebUI</body></html>')" in (outcome.error or "")
    (suggestion,) = annotate_documents(_client(server), [AnnotationDoc(1, "Moon", "The moon.")],
                                       [CategorySpec("space"), CategorySpec("food")])
    assert suggestion.status == "failed" and "internal error" not in suggestion.error
    assert "not JSON" in suggestion.error
