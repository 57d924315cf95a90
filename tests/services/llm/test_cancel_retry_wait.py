"""A Stop pressed while the client waits to retry ends the wait at once, against a real local server answering
429 with ``Retry-After: 30``: the call reports the cancellation well before the 30 s, sends no retry, and the
batch callers (pre-annotation, query generation, expansions) leave the item to do, as for one never sent."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

import db
from mrag_core.llm_strategies import LLM_FAMILIES
from services.annotate import AnnotationDoc, CategorySpec, annotate_documents
from services.expansion import rewrite_queries
from services.llm.cache import MemoryCache
from services.llm.client import LLMCancelled, LLMClient, LLMError
from services.llm_strategies import expand, expand_many
from services.querygen.generate import generate_queries
from services.querygen.sampling import QueryPlan
from services.workflows import annotation as aw
from tests.support.mini_corpus import TWO_DOCS, mini_store
from tests.support.openai_server import FakeOpenAIServer, Reply, fake_openai, is_fusion_request

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]
MESSAGES = [{"role": "user", "content": "say hi"}]
STOP_AFTER_S = 0.2
WELL_UNDER_S = 5.0  # the server asks for 30 s


def _busy(body: dict) -> Reply:
    return Reply.error(429, "rate limited", retry_after=30)


@pytest.fixture
def stop_soon() -> Iterator[Callable[[], threading.Event]]:
    """``stop_soon()``: a cancel event a timer sets ``STOP_AFTER_S`` later (the user pressing Stop)."""
    timers: list[threading.Timer] = []

    def start() -> threading.Event:
        cancel = threading.Event()
        timers.append(threading.Timer(STOP_AFTER_S, cancel.set))
        timers[-1].start()
        return cancel

    yield start
    for timer in timers:
        timer.cancel()


def test_cancel_ends_the_retry_wait_at_once(fake_openai: Factory, stop_soon: Callable[[], threading.Event]) -> None:
    server = fake_openai(_busy)
    client = LLMClient(server.llm_config(max_retries=2, api_key="sk-secret-0123456789"))  # real waiting
    cancel, started = stop_soon(), time.monotonic()
    with pytest.raises(LLMCancelled) as info:
        client.complete(MESSAGES, cancel=cancel)
    elapsed = time.monotonic() - started
    assert STOP_AFTER_S * 0.9 <= elapsed < WELL_UNDER_S
    assert len(server.requests) == 1  # the retry was never sent
    message = str(info.value)
    assert "cancelled while waiting 30 s to retry after HTTP 429: rate limited" in message
    assert "sk-secret" not in message
    assert not isinstance(info.value, LLMError)  # not a failure: batch callers must not record it as one


def test_without_cancel_the_injected_sleep_sees_the_servers_delay(fake_openai: Factory) -> None:
    server = fake_openai(_busy)
    sleeps: list[float] = []
    client = LLMClient(server.llm_config(max_retries=2), sleep=sleeps.append)
    with pytest.raises(LLMError, match="after 3 attempts: HTTP 429"):
        client.complete(MESSAGES)
    assert sleeps == [30.0, 30.0] and len(server.requests) == 3


def test_an_injected_sleep_still_notices_a_cancel_when_it_returns(fake_openai: Factory) -> None:
    server = fake_openai(_busy)
    cancel = threading.Event()
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        cancel.set()

    with pytest.raises(LLMCancelled):
        LLMClient(server.llm_config(max_retries=2), sleep=sleep).complete(MESSAGES, cancel=cancel)
    assert sleeps == [30.0] and len(server.requests) == 1


def test_a_cancel_that_is_never_set_changes_nothing(fake_openai: Factory) -> None:
    replies = iter([Reply.error(429, retry_after=0.01), Reply.ok("hello")])
    server = fake_openai(lambda body: next(replies))
    reply = LLMClient(server.llm_config(max_retries=2)).complete(MESSAGES, cancel=threading.Event())
    assert reply.text == "hello" and len(server.requests) == 2


def test_preannotation_stopped_in_a_retry_wait_leaves_the_document_to_do(
    fake_openai: Factory, stop_soon: Callable[[], threading.Event]
) -> None:
    server = fake_openai(_busy)
    client = LLMClient(server.llm_config(max_retries=2, concurrency=1))
    docs = [AnnotationDoc(i, f"Doc {i}", f"text number {i}") for i in range(3)]
    cancel, started = stop_soon(), time.monotonic()
    result = annotate_documents(client, docs, [CategorySpec("space"), CategorySpec("food")], cancel=cancel)
    assert time.monotonic() - started < WELL_UNDER_S
    assert result == []  # neither a failed suggestion nor a label: a resume asks for all three
    assert len(server.requests) == 1


def test_query_generation_stopped_in_a_retry_wait_leaves_the_plan_to_do(
    fake_openai: Factory, stop_soon: Callable[[], threading.Event]
) -> None:
    server = fake_openai(_busy)
    client = LLMClient(server.llm_config(max_retries=2, concurrency=1))
    plans = [QueryPlan(1, (doc_id,)) for doc_id in TWO_DOCS]
    cancel, started = stop_soon(), time.monotonic()
    result = generate_queries(plans, TWO_DOCS, client=client, cancel=cancel)
    assert time.monotonic() - started < WELL_UNDER_S
    assert result == [] and len(server.requests) == 1


def test_query_generation_stopped_while_the_fusion_request_waits_keeps_the_story(
    fake_openai: Factory, stop_soon: Callable[[], threading.Event]
) -> None:
    """The story came back (90 + 30 tokens paid for); its Fusion request waits out a 429 when the user stops: the
    story is kept, flagged with no sub-queries, instead of leaving the whole plan to be asked for again."""
    story = "The Moon orbits the Earth and its craters were seen by the crew at night."

    def respond(body: dict) -> Reply:
        if is_fusion_request(body):
            return Reply.error(429, "rate limited", retry_after=30)
        return Reply.ok(story, prompt_tokens=90, completion_tokens=30)

    server = fake_openai(respond)
    client = LLMClient(server.llm_config(max_retries=2, concurrency=1))
    cancel, started = stop_soon(), time.monotonic()
    result = generate_queries([QueryPlan(1, ("1",))], TWO_DOCS, client=client, cancel=cancel, want_fusion=True)
    assert time.monotonic() - started < WELL_UNDER_S
    assert len(server.requests) == 2  # the story and one Fusion request; its retry never sent
    [kept] = result
    assert (kept.index, kept.status, kept.text, kept.fusion, kept.missing_titles) == (0, "flagged", story, (), ())
    assert (kept.prompt_tokens, kept.completion_tokens) == (90, 30)
    assert kept.error is not None and kept.error.startswith("Fusion sub-queries were not made: LLM request to model ")
    assert kept.error.endswith("stopped: cancelled while waiting 30 s to retry after HTTP 429: rate limited.")


def test_an_expansion_given_the_cancel_event_stops_alike(
    fake_openai: Factory, stop_soon: Callable[[], threading.Event]
) -> None:
    server = fake_openai(_busy)
    client = LLMClient(server.llm_config(max_retries=2))
    with pytest.raises(LLMCancelled):
        rewrite_queries(client, "Which moons orbit Mars?", 3, cancel=stop_soon())
    assert len(server.requests) == 1


def test_stored_preannotation_stopped_in_a_retry_wait_is_cancelled_with_nothing_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: Factory
) -> None:
    """Through the workflow the app and the CLI run (its own breaker on the cancel event): no workflow change."""
    _url, store, corpus_id, doc_ids = mini_store(tmp_path, monkeypatch)
    cancel = threading.Event()

    def busy_then_stop(body: dict) -> Reply:  # the user presses Stop once the first request was refused (a timer
        threading.Timer(STOP_AFTER_S, cancel.set).start()  # from the start could fire before the first request)
        return _busy(body)

    server = fake_openai(busy_then_stop)
    with LLMClient(server.llm_config(max_retries=2, concurrency=1)) as client:
        started = time.monotonic()
        summary = aw.preannotate(store, corpus_id, aw.LLMAnnotator(client), batch_size=2, cancel=cancel)
    assert time.monotonic() - started < WELL_UNDER_S and len(server.requests) == 1
    assert (summary.cancelled, summary.stored, summary.remaining) == (True, 0, len(doc_ids))
    assert all(db.list_suggestions(store, d) == [] for d in doc_ids)
    store.close()


@pytest.mark.parametrize("family", LLM_FAMILIES)
def test_an_evaluation_run_expansion_stopped_in_a_retry_wait_returns_at_once(
    fake_openai: Factory, stop_soon: Callable[[], threading.Event], family: str
) -> None:
    """``expand`` takes the cancel event; ``expand_many`` (an evaluation run's expansions) hands it on through
    ``expand_one``, so the question comes back cancelled (to do), not after the server's 30 s."""
    server = fake_openai(_busy)
    client = LLMClient(server.llm_config(max_retries=1))
    with pytest.raises(LLMCancelled):
        expand(client, family, "Which moons orbit Mars?", cancel=stop_soon())
    assert len(server.requests) == 1

    cache = MemoryCache()
    cancel, started = stop_soon(), time.monotonic()
    (outcome,) = expand_many(client, family, ["Which moons orbit Mars?"], cache=cache, cancel=cancel)
    assert time.monotonic() - started < WELL_UNDER_S
    assert (outcome.cancelled, outcome.ok, outcome.texts, outcome.tokens) == (True, False, (), 0)
    assert len(server.requests) == 2 and len(cache) == 0  # one request for expand_many, nothing cached
