"""LLMClient against a real OpenAI-compatible server on 127.0.0.1: JSON-schema output and token log-probabilities
where the endpoint allows them, and asked again without them (remembered for the client's later requests) where it
refuses them; refusals; every error names its cause; timeouts retried as asked; requests in flight abandoned at
once from another thread."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

from services.llm.client import LLMCancelled, LLMClient, LLMError
from tests.support.openai_server import FakeOpenAIServer, Reply, fake_openai

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]
SCHEMA = {"name": "category_choice", "strict": True,
          "schema": {"type": "object", "properties": {"label": {"type": "string", "enum": ["a", "b"]}},
                     "required": ["label"], "additionalProperties": False}}
ASK = [{"role": "user", "content": "which?"}]


def _client(server: FakeOpenAIServer, **config: Any) -> LLMClient:
    return LLMClient(server.llm_config(**{"max_retries": 0, **config}), sleep=lambda s: None)


def test_the_schema_and_logprobs_are_sent_and_read(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.ok('{"label": "a"}', logprobs=[('{"label": "', -0.01), ("a", -0.2),
                                                                             ('"}', -0.01)]))
    reply = _client(server).complete(ASK, json_schema=SCHEMA, logprobs=0)
    (body,) = server.requests
    assert body["response_format"] == {"type": "json_schema", "json_schema": SCHEMA}
    assert body["logprobs"] is True and "top_logprobs" not in body
    assert reply.logprobs == (('{"label": "', -0.01), ("a", -0.2), ('"}', -0.01))


def test_a_refused_schema_falls_back_to_json_mode_once_for_the_client(fake_openai: Factory) -> None:
    def respond(body: dict[str, Any]) -> Reply | str:
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return Reply.error(400, "response_format type 'json_schema' is not supported")
        return '{"label": "a"}'

    server = fake_openai(respond)
    client = _client(server)
    assert client.complete(ASK, json_schema=SCHEMA).text == '{"label": "a"}'
    assert [b["response_format"]["type"] for b in server.requests] == ["json_schema", "json_object"]
    assert client.unsupported == {"json_schema": "HTTP 400: response_format type 'json_schema' is not supported"}
    client.complete(ASK, json_schema=SCHEMA)  # remembered: no schema asked any more
    assert [b["response_format"]["type"] for b in server.requests] == ["json_schema", "json_object", "json_object"]


def test_refused_logprobs_are_dropped_and_remembered(fake_openai: Factory) -> None:
    def respond(body: dict[str, Any]) -> Reply | str:
        return Reply.error(422, "logprobs is not supported by this model") if body.get("logprobs") else "fine"

    server = fake_openai(respond)
    client = _client(server)
    assert client.complete(ASK, json_schema=SCHEMA, logprobs=0).logprobs is None
    client.complete(ASK, json_schema=SCHEMA, logprobs=0)
    assert [("logprobs" in b, b["response_format"]["type"]) for b in server.requests] == [
        (True, "json_schema"), (False, "json_schema"), (False, "json_schema")]
    assert list(client.unsupported) == ["logprobs"]


def test_a_400_for_this_request_alone_turns_nothing_off(fake_openai: Factory) -> None:
    """A prompt too long for the context: asked once more without the optional parts (one request, as before
    schemas), then the error, with its cause; nothing is remembered as unsupported."""
    server = fake_openai(lambda body: Reply.error(400, "This model's maximum context length is 2048 tokens"))
    client = _client(server)
    with pytest.raises(LLMError) as caught:
        client.complete(ASK, json_schema=SCHEMA, logprobs=0)
    assert len(server.requests) == 2 and "response_format" not in server.requests[1]
    assert caught.value.cause == "rejected" and client.unsupported == {}


def test_a_refusal_is_kept_apart_from_the_text(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.refused("I can't help with that."))
    reply = _client(server).complete(ASK, json_schema=SCHEMA)
    assert (reply.text, reply.refusal) == ("", "I can't help with that.")


@pytest.mark.parametrize(("reply", "cause"), [
    (Reply.error(401, "bad key"), "auth"), (Reply.error(403, "forbidden"), "auth"),
    (Reply.error(404, "no such model"), "not_found"), (Reply.error(429, "slow down"), "rate_limit"),
    (Reply.error(503, "overloaded"), "server"), (Reply.error(413, "too large"), "rejected"),
    (Reply.body(b"<html>hello</html>"), "bad_answer"), (Reply.slow(2.0, "late"), "timeout"),
])
def test_every_error_names_its_cause(fake_openai: Factory, reply: Reply, cause: str) -> None:
    server = fake_openai(lambda body: reply)
    with pytest.raises(LLMError) as caught:
        _client(server, timeout_s=0.3).complete(ASK)
    assert caught.value.cause == cause


def test_an_unreachable_endpoint_is_a_connection_cause() -> None:
    server = FakeOpenAIServer(lambda body: "x").start()
    config = server.llm_config(max_retries=0)
    server.stop()
    with pytest.raises(LLMError) as caught:
        LLMClient(config).complete(ASK)
    assert caught.value.cause == "connection"


@pytest.mark.parametrize(("timeout_retries", "requests"), [(0, 1), (1, 2)])
def test_timeouts_are_retried_as_asked(fake_openai: Factory, timeout_retries: int, requests: int) -> None:
    server = fake_openai(lambda body: Reply.slow(1.0, "late"))
    with pytest.raises(LLMError, match="no answer within 0.2 s"):
        _client(server, timeout_s=0.2, max_retries=4).complete(ASK, timeout_retries=timeout_retries)
    assert len(server.requests) == requests


def test_abort_in_flight_ends_the_requests_at_once(fake_openai: Factory) -> None:
    """Two requests wait for a 10 s answer on a one-slot server; another thread aborts them: both calls raise
    LLMCancelled within a fraction of a second, and the server sees both clients go (the queued one and the one in
    its slot). The client answers the next call as usual."""
    server = FakeOpenAIServer(lambda body: Reply.slow(10.0, "late") if body["messages"][0]["content"] != "next"
                              else "fresh", slots=1).start()
    try:
        client = LLMClient(server.llm_config(max_retries=3, timeout_s=30))
        outcomes: list[tuple[str, float]] = []

        def call() -> None:
            try:
                client.complete(ASK)
                outcomes.append(("answered", time.monotonic()))
            except LLMCancelled:
                outcomes.append(("cancelled", time.monotonic()))

        threads = [threading.Thread(target=call) for _ in range(2)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 5
        while server.in_flight < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        aborted_at = time.monotonic()
        assert client.abort_in_flight() >= 2
        for thread in threads:
            thread.join(5)
        assert [what for what, _ in outcomes] == ["cancelled", "cancelled"]
        assert max(when for _, when in outcomes) - aborted_at < 0.5
        deadline = time.monotonic() + 2
        while server.abandoned < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.abandoned == 2 and len(server.requests) == 2  # not retried
        assert client.complete([{"role": "user", "content": "next"}]).text == "fresh"
    finally:
        server.stop()
