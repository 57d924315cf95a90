"""Batches of LLM calls against a real local server that fails for every request: after the first failure that
every other request would repeat, nothing more is sent (1,000 documents against a wrong key sent 1,000
requests, against a stopped server 1,000 x 5 attempts with backoff), and what was not sent stays to do."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import pytest

from mrag_core.llm_strategies import cost_summary
from services.annotate import AnnotationDoc, CategorySpec, annotate_documents
from services.llm.breaker import Breaker
from services.llm.cache import MemoryCache
from services.llm.client import LLMClient, LLMError
from services.llm_strategies import expand_many
from services.querygen.generate import generate_queries
from services.querygen.sampling import QueryPlan
from tests.support.openai_server import FakeOpenAIServer, Reply, by_content, fake_openai

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]
CATEGORIES = [CategorySpec("space"), CategorySpec("food")]
DOCS = [AnnotationDoc(i, f"Doc {i}", f"text number {i}") for i in range(10)]


@dataclass(frozen=True)
class Doc:
    title: str
    text: str


STORY_DOCS = {str(i): Doc(f"Title{i}", f"Text of document {i}.") for i in range(8)}
PLANS = [QueryPlan(1, (str(i),)) for i in range(8)]


def _client(server: FakeOpenAIServer, **config: object) -> LLMClient:
    return LLMClient(server.llm_config(max_retries=0, **config), sleep=lambda s: None)


@pytest.mark.parametrize("status", [401, 404, 429, 500])
def test_annotation_stops_sending_after_an_endpoint_wide_error(fake_openai: Factory, status: int) -> None:
    server = fake_openai(lambda body: Reply.error(status, "nope"))
    suggestions = annotate_documents(_client(server), DOCS, CATEGORIES, limit=1)
    assert len(server.requests) == 1
    assert [(s.document_key, s.status) for s in suggestions] == [(0, "failed")]  # the other 9 stay to do
    assert f"HTTP {status}: nope" in suggestions[0].error


def test_annotation_of_a_stopped_server_stops_after_the_requests_in_flight() -> None:
    server = FakeOpenAIServer(lambda body: "never").start()
    config = server.llm_config(max_retries=1, concurrency=2)
    server.stop()
    attempts: list[float] = []
    suggestions = annotate_documents(LLMClient(config, sleep=attempts.append), DOCS, CATEGORIES)
    assert 1 <= len(suggestions) <= 2 and all("could not connect" in s.error for s in suggestions)
    # one backoff per document sent (at most the 2 in flight), not 10 x 2; a document whose backoff ended after
    # the other one tripped the breaker is not tried again and is left to do, like one never sent
    assert len(suggestions) <= len(attempts) <= 2


def test_a_per_request_error_does_not_stop_the_batch(fake_openai: Factory) -> None:
    # HTTP 400 (e.g. this document's prompt is too long for the model) says nothing about the others
    def respond(text: str) -> Reply | str:
        return Reply.error(400, "context length exceeded") if "text number 3" in text else '{"label": "space"}'

    server = fake_openai(by_content(respond))
    suggestions = annotate_documents(_client(server), DOCS, CATEGORIES, limit=1)
    assert len(server.requests) == 11  # document 3 once more without JSON mode (the client's fallback for a 400)
    assert [s.status for s in suggestions] == ["ok"] * 3 + ["failed"] + ["ok"] * 6


def test_query_generation_leaves_unsent_plans_to_resume(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.error(401, "bad key"))
    results = generate_queries(PLANS, STORY_DOCS, client=_client(server), limit=1)
    assert len(server.requests) == 1
    assert [(g.index, g.status) for g in results] == [(0, "failed")]
    assert "HTTP 401" in (results[0].error or "")


def test_expansions_not_sent_are_failed_not_cancelled_and_cost_nothing(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.error(404, "model 'fake-model' not found"))
    questions = [f"question {i} about the moon?" for i in range(6)]
    outcomes = expand_many(_client(server), "multi-query", questions, cache=MemoryCache(), limit=1)
    assert len(server.requests) == 1
    assert [o.sent for o in outcomes] == [True] + [False] * 5
    assert not any(o.ok or o.cancelled for o in outcomes)  # an evaluation run searches them with their own text
    assert outcomes[1].error == f"not sent: an earlier request failed: {outcomes[0].error.split(': ', 1)[1]}"
    summary = cost_summary(o.record() for o in outcomes)
    assert (summary["failed"], summary["requests"], summary["expansions"]) == (6, 1, 6)


def test_a_user_cancel_still_reads_as_cancelled(fake_openai: Factory) -> None:
    cancel = threading.Event()
    cancel.set()
    server = fake_openai(lambda body: "rewrite one")
    outcomes = expand_many(_client(server), "multi-query", ["q1?", "q2?"], cache=MemoryCache(), cancel=cancel)
    assert [o.cancelled for o in outcomes] == [True, True] and server.requests == []


def test_breaker_ignores_per_request_statuses() -> None:
    breaker = Breaker()
    for status in (400, 413, 422):
        breaker.record(LLMError("x", status_code=status))
    assert not breaker.is_set()
    breaker.record(LLMError("unreachable", status_code=None))
    breaker.record(LLMError("later", status_code=500))
    assert breaker.is_set() and breaker.error == "unreachable"
