"""A request waiting out a long ``Retry-After`` stops waiting once another thread of the same run trips the breaker
(the key refused, the endpoint gone): every other request would fail the same way, so the wait is not sat out.
Against a real local server, with the client's real waits and requests in flight on two threads: one item gets
429 ``Retry-After: 30`` and waits, the other gets 401 a moment later; the batch returns well before the 30 s,
with the waiting item not sent again and reported as the breaker says (not sent / left to do)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

import pytest

from mrag_core.llm_strategies import cost_summary
from services.annotate import AnnotationDoc, CategorySpec, annotate_documents
from services.llm.breaker import Breaker
from services.llm.cache import MemoryCache
from services.llm.client import LLMCancelled, LLMClient, LLMError
from services.llm_strategies import expand_many
from services.querygen.generate import generate_queries
from services.querygen.sampling import QueryPlan
from services.querygen.story_prompt import FUSION_PROMPT_START
from tests.support.openai_server import FakeOpenAIServer, Reply, by_content, fake_openai

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]
WELL_UNDER_S = 5.0  # the server asks for 30 s
REFUSED_AFTER_S = 0.3  # the refused request answers this long after the 429 went out, so that one is waiting
BUSY_SERVED_WITHIN_S = 10.0  # how long the refused request waits for the 429 to be served (a slow machine)


def _refused_after(busy_served: threading.Event) -> Reply:
    """The 401, answered only once the 429 was served (the server's handler threads run side by side), and then
    REFUSED_AFTER_S later: on a busy machine a fixed head start alone let the 401 come first."""
    busy_served.wait(BUSY_SERVED_WITHIN_S)
    return Reply.error(401, "invalid api key", delay_s=REFUSED_AFTER_S)


def _busy_or_refused() -> Callable[[str], Reply]:
    """429 Retry-After: 30 for the text naming "busy", a 401 for the one naming "refused" once the 429 is out."""
    busy_served = threading.Event()

    def reply(text: str) -> Reply:
        if "refused" in text:
            return _refused_after(busy_served)
        if "busy" in text:
            busy_served.set()
            return Reply.error(429, "rate limited", retry_after=30)
        return Reply.error(599, f"unexpected request: {text[:60]}")

    return reply


def _client(server: FakeOpenAIServer) -> LLMClient:
    return LLMClient(server.llm_config(max_retries=1, concurrency=2))  # real waiting


def test_a_trip_from_another_thread_ends_the_breakers_wait(later: Callable[[float, Callable[[], None]], None]) -> None:
    breaker = Breaker(threading.Event())
    later(0.1, lambda: breaker.record(LLMError("could not connect", status_code=None)))
    started = time.monotonic()
    assert breaker.wait(30) is True
    assert 0.09 <= time.monotonic() - started < WELL_UNDER_S
    assert breaker.is_set() and not breaker.cancelled and breaker.error == "could not connect"


def test_the_users_cancel_ends_the_breakers_wait(later: Callable[[float, Callable[[], None]], None]) -> None:
    cancel = threading.Event()
    breaker = Breaker(cancel)
    later(0.1, cancel.set)
    started = time.monotonic()
    assert breaker.wait(30) is True
    assert 0.09 <= time.monotonic() - started < WELL_UNDER_S
    assert breaker.cancelled and not breaker.tripped


@pytest.mark.parametrize("cancel", [None, threading.Event()], ids=["no-cancel", "cancel"])
def test_the_breakers_wait_lasts_its_timeout_when_nothing_happens(cancel: threading.Event | None) -> None:
    breaker = Breaker(cancel)
    breaker.record(LLMError("prompt too long", status_code=400))  # about one request: trips nothing
    started = time.monotonic()
    assert breaker.wait(0.15) is False
    assert 0.14 <= time.monotonic() - started < 1.0
    assert breaker.cancel_event is not None and breaker.cancel_event.is_set() is False


def test_the_clients_stop_message_says_another_request_failed_when_the_breaker_tripped(
        fake_openai: Factory, later: Callable[[float, Callable[[], None]], None]) -> None:
    """The wait ends because another request of the batch failed for good, not because anyone cancelled: the
    message says so and names that failure (it said 'cancelled while waiting ... to retry' for both)."""
    server = fake_openai(lambda body: Reply.error(429, "rate limited", retry_after=30))
    client = LLMClient(server.llm_config(max_retries=1, api_key="sk-secret-0123456789"))
    breaker = Breaker(threading.Event())
    later(0.1, lambda: breaker.record(LLMError("HTTP 401: invalid api key", status_code=401)))
    started = time.monotonic()
    with pytest.raises(LLMCancelled) as info:
        client.complete([{"role": "user", "content": "say hi"}], cancel=breaker.cancel_event)
    assert time.monotonic() - started < WELL_UNDER_S and len(server.requests) == 1
    message = str(info.value)
    assert message.endswith(" stopped while waiting 30 s to retry after HTTP 429: rate limited: another request "
                            "of this batch failed in a way every request would (HTTP 401: invalid api key), so "
                            "this one was not sent again.")
    assert "cancelled" not in message and "sk-secret" not in message


def test_expansions_stop_waiting_when_another_request_trips_the_breaker(fake_openai: Factory) -> None:
    server = fake_openai(by_content(_busy_or_refused()))
    cache = MemoryCache()
    questions = ["Which moons orbit Mars (busy)?", "Which moons orbit Venus (refused)?"]
    started = time.monotonic()
    busy, refused = expand_many(_client(server), "multi-query", questions, cache=cache, limit=2)
    assert time.monotonic() - started < WELL_UNDER_S
    assert len(server.requests) == 2 and len(cache) == 0  # the busy question was not asked again
    assert (refused.sent, refused.cancelled) == (True, False) and "HTTP 401: invalid api key" in (refused.error or "")
    # The busy question sent its one request (the 429) and was stopped before the retry: sent, failed, counted.
    assert (busy.sent, busy.cancelled, busy.texts, busy.tokens) == (True, False, (), 0)
    assert busy.error == ("sent, then stopped while waiting to retry: an earlier request failed: "
                          f"{refused.error.split(': ', 1)[1]}")
    summary = cost_summary([busy.record(), refused.record()])
    assert (summary["requests"], summary["failed"], summary["spent_tokens"]) == (2, 2, 0)  # the server's 2 requests


def test_preannotation_stops_waiting_when_another_request_trips_the_breaker(fake_openai: Factory) -> None:
    server = fake_openai(by_content(_busy_or_refused()))
    docs = [AnnotationDoc(0, "Busy", "busy text"), AnnotationDoc(1, "Refused", "refused text")]
    started = time.monotonic()
    suggestions = annotate_documents(_client(server), docs, [CategorySpec("space"), CategorySpec("food")], limit=2)
    assert time.monotonic() - started < WELL_UNDER_S
    assert len(server.requests) == 2
    # the refused document failed; the waiting one is left to do (a resume asks for it), as one never sent
    assert [(s.document_key, s.status) for s in suggestions] == [(1, "failed")]


@dataclass(frozen=True)
class Doc:
    title: str
    text: str


def test_query_generation_stops_waiting_when_another_request_trips_the_breaker(fake_openai: Factory) -> None:
    server = fake_openai(by_content(_busy_or_refused()))
    docs = {"1": Doc("Busy", "A busy article about Mars."), "2": Doc("Refused", "A refused article about Venus.")}
    started = time.monotonic()
    results = generate_queries([QueryPlan(1, ("1",)), QueryPlan(1, ("2",))], docs, client=_client(server), limit=2)
    assert time.monotonic() - started < WELL_UNDER_S
    assert len(server.requests) == 2
    assert [(g.index, g.status) for g in results] == [(1, "failed")]  # plan 0 stays to do
    assert "HTTP 401" in (results[0].error or "")


MARS_STORY = "On Mars the crew watched the dust storms roll over the red plains for days."


def _fusion_busy_or_refused() -> Callable[[str], Reply]:
    """A story about Mars (100 + 40 tokens), whose Fusion request gets 429 Retry-After: 30; a 401 for the story
    naming 'Refused' once that 429 is out."""
    busy_served = threading.Event()

    def reply(text: str) -> Reply:
        if text.startswith(FUSION_PROMPT_START):
            busy_served.set()
            return Reply.error(429, "rate limited", retry_after=30)
        if "Refused" in text:
            return _refused_after(busy_served)
        return Reply.ok(MARS_STORY, prompt_tokens=100, completion_tokens=40)

    return reply


def test_query_generation_keeps_the_story_when_the_breaker_trips_during_its_fusion_retry_wait(
        fake_openai: Factory) -> None:
    """Plan 0's story came back (140 tokens paid) and its Fusion request waits out a 429 when plan 1's story gets a
    401: the story is kept, flagged with no sub-queries and the reason, so a resume does not ask for it again
    (the whole plan was left to do)."""
    server = fake_openai(by_content(_fusion_busy_or_refused()))
    docs = {"1": Doc("Mars", "An article about Mars."), "2": Doc("Refused", "A refused article about Venus.")}
    started = time.monotonic()
    results = generate_queries([QueryPlan(1, ("1",)), QueryPlan(1, ("2",))], docs, client=_client(server), limit=2,
                               want_fusion=True, n_fusion=2)
    assert time.monotonic() - started < WELL_UNDER_S
    assert len(server.requests) == 3  # story 0, its fusion request (429, not sent again), story 1 (401)
    kept, refused = results
    assert (kept.index, kept.status, kept.text, kept.fusion) == (0, "flagged", MARS_STORY, ())
    assert (kept.prompt_tokens, kept.completion_tokens, kept.missing_titles) == (100, 40, ())
    assert kept.error is not None and kept.error.startswith("Fusion sub-queries were not made: LLM request to model ")
    assert kept.error.endswith("stopped while waiting 30 s to retry after HTTP 429: rate limited: another request of "
                               f"this batch failed in a way every request would ({refused.error}), so this one was "
                               "not sent again.")
    assert (refused.index, refused.status, refused.text) == (1, "failed", None) and "HTTP 401" in refused.error
