"""A Stop during the client's wait to retry does not lose the failed request that caused the wait: the client counts
such calls (``LLMClient.cancelled_after_failure``), so a batch that counts requests and failures can count them.
Against a real local server answering HTTP 500 or 429, with the client's real waits; the Stop comes while it waits."""

from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

from services.llm.breaker import Breaker
from services.llm.client import LLMCancelled, LLMClient, LLMError
from services.llm.concurrency import run_concurrent
from tests.support.openai_server import FakeOpenAIServer, Reply, fake_openai, scripted

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]
MESSAGES = [{"role": "user", "content": "say hi"}]
STOP_AFTER_S = 0.2
BACKOFF_BASE_S = 10.0  # the first backoff waits 5 to 10 s: the Stop (0.2 s) comes well inside it
WELL_UNDER_S = 4.0


def test_a_stop_in_the_backoff_after_a_500_counts_the_failed_call(
        fake_openai: Factory, later: Callable[[float, Callable[[], None]], None]) -> None:
    server = fake_openai(scripted([Reply.error(500, "overloaded")]))
    client = LLMClient(server.llm_config(max_retries=3), backoff_base_s=BACKOFF_BASE_S)
    cancel, started = threading.Event(), time.monotonic()
    later(STOP_AFTER_S, cancel.set)
    with pytest.raises(LLMCancelled, match="cancelled while waiting .* to retry after HTTP 500: overloaded"):
        client.complete(MESSAGES, cancel=cancel)
    assert STOP_AFTER_S * 0.9 <= time.monotonic() - started < WELL_UNDER_S  # the wait ended at the Stop
    assert len(server.requests) == 1 and client.cancelled_after_failure == 1


def test_only_calls_stopped_in_a_retry_wait_count(fake_openai: Factory,
                                                  later: Callable[[float, Callable[[], None]], None]) -> None:
    """An answered call, and one that failed for good (an LLMError its caller counts), leave the count as it is;
    each call stopped in its wait adds one, through a breaker on the user's cancel too."""
    server = fake_openai(scripted(["hello", Reply.error(404, "no such model"), Reply.error(429, "slow down",
                                                                                           retry_after=30)]))
    client = LLMClient(server.llm_config(max_retries=2))
    assert client.complete(MESSAGES).text == "hello"
    with pytest.raises(LLMError):
        client.complete(MESSAGES)
    assert client.cancelled_after_failure == 0
    cancel = threading.Event()
    later(STOP_AFTER_S, cancel.set)
    with pytest.raises(LLMCancelled):
        client.complete(MESSAGES, cancel=Breaker(cancel))  # how batches pass the user's cancel
    assert client.cancelled_after_failure == 1 and len(server.requests) == 3


def test_a_wait_a_tripped_breaker_ends_is_not_counted_here(
        fake_openai: Factory, later: Callable[[float, Callable[[], None]], None]) -> None:
    """Another request of the batch failing for good ends the wait too; that batch reports the call as failed
    itself (expansions: 'sent, then stopped...'), so the client does not count it a second time."""
    server = fake_openai(scripted([Reply.error(429, "slow down", retry_after=30)]))
    client = LLMClient(server.llm_config(max_retries=2))
    breaker = Breaker(threading.Event())
    later(STOP_AFTER_S, lambda: breaker.record(LLMError("invalid api key", status_code=401)))
    with pytest.raises(LLMCancelled, match="another request of this batch failed"):
        client.complete(MESSAGES, cancel=breaker)
    assert client.cancelled_after_failure == 0 and len(server.requests) == 1


def test_every_request_of_a_batch_stopped_in_its_wait_is_counted(
        fake_openai: Factory, later: Callable[[float, Callable[[], None]], None]) -> None:
    """Three requests in flight get HTTP 500 and wait to retry; the Stop ends the three waits: run_concurrent reports
    the three items cancelled (to do), and the client counts the three failed requests the server received."""
    server = fake_openai(lambda body: Reply.error(500, "overloaded"))
    client = LLMClient(server.llm_config(max_retries=3), backoff_base_s=BACKOFF_BASE_S)
    cancel = threading.Event()
    later(STOP_AFTER_S, cancel.set)
    outcomes = run_concurrent(["a", "b", "c"], lambda text: client.complete([{"role": "user", "content": text}],
                                                                            cancel=cancel), limit=3, cancel=cancel)
    assert [o.cancelled for o in outcomes] == [True, True, True]
    assert client.cancelled_after_failure == len(server.requests) == 3
