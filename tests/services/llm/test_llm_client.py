"""LLMClient against a real local HTTP server speaking the OpenAI API (real ``openai`` client)."""

from __future__ import annotations

import email.utils
import json
import random
from typing import Callable

import pytest

from services.llm.client import LLMClient, LLMError, backoff_delay, parse_retry_after
from tests.support.openai_server import FakeOpenAIServer, Reply, by_content, fake_openai, scripted

__all__ = ["fake_openai"]  # re-exported fixture

Factory = Callable[..., FakeOpenAIServer]
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "say hi"}]


def _client(server: FakeOpenAIServer, sleeps: list[float] | None = None, **config: object) -> LLMClient:
    recorder = sleeps.append if sleeps is not None else (lambda s: None)
    return LLMClient(server.llm_config(**config), sleep=recorder, backoff_base_s=0.01, rng=random.Random(7))


def test_good_answer_records_text_usage_and_request(fake_openai: Factory) -> None:
    server = fake_openai(scripted([Reply.ok("hi!", prompt_tokens=11, completion_tokens=3, model="served-model")]))
    reply = _client(server).complete(MESSAGES, temperature=0.3, max_tokens=20)
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens, reply.model) == ("hi!", 11, 3, "served-model")
    assert 0 <= reply.latency_s < 1.0
    (body,) = server.requests
    assert body["model"] == "fake-model"
    assert body["messages"] == MESSAGES
    assert body["temperature"] == 0.3 and body["max_tokens"] == 20
    assert "response_format" not in body
    assert server.request_headers[0]["authorization"] == "Bearer test-key"


def test_json_mode_sends_response_format(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: '{"a": 1}')
    reply = _client(server).complete(MESSAGES, json_mode=True)
    assert json.loads(reply.text) == {"a": 1}
    assert server.requests[0]["response_format"] == {"type": "json_object"}


def test_json_mode_rejected_by_endpoint_falls_back_and_is_remembered(fake_openai: Factory) -> None:
    def respond(body: dict) -> Reply:
        if "response_format" in body:
            return Reply.error(400, "response_format is not supported")
        return Reply.ok("plain")

    server = fake_openai(respond)
    client = _client(server)
    assert client.complete(MESSAGES, json_mode=True).text == "plain"
    assert client.json_mode_supported is False
    assert client.complete(MESSAGES, json_mode=True).text == "plain"
    assert ["response_format" in b for b in server.requests] == [True, False, False]


def test_no_key_sends_a_placeholder_not_the_process_env(fake_openai: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-shell-should-not-be-sent")
    server = fake_openai(lambda body: "ok")
    _client(server, api_key=None).complete(MESSAGES)
    assert server.request_headers[0]["authorization"] == "Bearer no-key"


def test_429_then_success_honours_retry_after(fake_openai: Factory) -> None:
    server = fake_openai(scripted([Reply.error(429, "slow down", retry_after=2), Reply.ok("done")]))
    sleeps: list[float] = []
    assert _client(server, sleeps).complete(MESSAGES).text == "done"
    assert len(server.requests) == 2
    assert sleeps == [2.0]


def test_retry_after_up_to_the_cap_is_waited(fake_openai: Factory) -> None:
    server = fake_openai(scripted([Reply.error(503, retry_after=5), Reply.ok("done")]))
    sleeps: list[float] = []
    client = LLMClient(server.llm_config(), sleep=sleeps.append, retry_after_cap_s=5.0)
    assert client.complete(MESSAGES).text == "done"
    assert sleeps == [5.0]


def test_retry_after_beyond_the_cap_fails_at_once_saying_how_long(fake_openai: Factory) -> None:
    # waiting the cap and asking again would only be refused again: 4 retries x 120 s for nothing
    server = fake_openai(scripted([Reply.error(503, retry_after=3600), Reply.ok("done")]))
    sleeps: list[float] = []
    client = LLMClient(server.llm_config(), sleep=sleeps.append, retry_after_cap_s=5.0)
    with pytest.raises(LLMError, match="asks to wait 3600 s") as info:
        client.complete(MESSAGES)
    assert len(server.requests) == 1 and sleeps == []
    assert info.value.status_code == 503 and "try again later" in str(info.value)


def test_timeout_then_success(fake_openai: Factory) -> None:
    server = fake_openai(scripted([Reply.slow(3.0, "too late"), Reply.ok("in time")]))
    sleeps: list[float] = []
    reply = _client(server, sleeps, timeout_s=0.5).complete(MESSAGES)
    assert reply.text == "in time"
    assert len(server.requests) == 2
    assert len(sleeps) == 1 and 0.005 <= sleeps[0] <= 0.01  # attempt 0: base * U(0.5, 1)


def test_persistent_500_raises_after_all_attempts_with_exponential_backoff(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.error(500, "boom"))
    sleeps: list[float] = []
    with pytest.raises(LLMError) as info:
        _client(server, sleeps, max_retries=3).complete(MESSAGES)
    assert len(server.requests) == 4
    assert info.value.attempts == 4 and info.value.status_code == 500 and info.value.retryable
    assert "after 4 attempts" in str(info.value) and "boom" in str(info.value)
    assert len(sleeps) == 3
    for attempt, slept in enumerate(sleeps):
        assert 0.01 * 2**attempt * 0.5 <= slept <= 0.01 * 2**attempt


def test_401_fails_at_once_and_never_leaks_the_key(fake_openai: Factory) -> None:
    key = "sk-live-abcdef0123456789"
    server = fake_openai(lambda body: Reply.error(401, f"Incorrect API key provided: {key}"))
    sleeps: list[float] = []
    with pytest.raises(LLMError) as info:
        _client(server, sleeps, api_key=key).complete(MESSAGES)
    assert len(server.requests) == 1 and sleeps == []
    assert info.value.status_code == 401 and not info.value.retryable
    assert key not in str(info.value) and "sk-live" not in repr(info.value)
    assert "Check the API key" in str(info.value)


def test_404_unknown_model_is_not_retried(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.error(404, "model 'fake-model' not found"))
    with pytest.raises(LLMError, match="model name") as info:
        _client(server).complete(MESSAGES)
    assert len(server.requests) == 1 and info.value.status_code == 404


def test_connection_refused_is_retried_then_reported() -> None:
    server = FakeOpenAIServer(lambda body: "never").start()
    config = server.llm_config(max_retries=1)
    server.stop()
    sleeps: list[float] = []
    with pytest.raises(LLMError, match="could not connect") as info:
        LLMClient(config, sleep=sleeps.append, backoff_base_s=0.01).complete(MESSAGES)
    assert info.value.attempts == 2 and info.value.status_code is None and len(sleeps) == 1


def test_missing_usage_counts_zero_tokens(fake_openai: Factory) -> None:
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "no usage"}, "finish_reason": "stop"}],
    }
    server = fake_openai(lambda b: Reply(raw_body=json.dumps(body).encode()))
    reply = _client(server).complete(MESSAGES)
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("no usage", 0, 0)


def test_no_choices_is_an_llm_error(fake_openai: Factory) -> None:
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}
    server = fake_openai(lambda b: Reply(raw_body=json.dumps(body).encode()))
    with pytest.raises(LLMError, match="no choices"):
        _client(server).complete(MESSAGES)


def test_by_content_sees_the_last_user_message(fake_openai: Factory) -> None:
    server = fake_openai(by_content(lambda text: text.upper()))
    assert _client(server).complete(MESSAGES).text == "SAY HI"


def test_parse_retry_after_variants() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "-4"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=1_000_000.0) == pytest.approx(30.0)


def test_backoff_delay_bounds_and_cap() -> None:
    rng = random.Random(0)
    for attempt in range(8):
        raw = min(4.0, 0.5 * 2**attempt)
        assert raw / 2 <= backoff_delay(attempt, 0.5, 4.0, rng) <= raw
