"""LLMClient against a real local server that misbehaves: 200s that are not chat completions, a hanging
server, a finish_reason of "length". Every failure must be an LLMError with a readable message (the flows
catch LLMError only: anything else reached the Reader and the Query Builder's Regenerate as a traceback)."""

from __future__ import annotations

import json
import random
from typing import Callable

import pytest

from services.llm.client import LLMClient, LLMError
from tests.support.openai_server import FakeOpenAIServer, Reply, fake_openai, scripted

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]
MESSAGES = [{"role": "user", "content": "say hi"}]
KEY = "sk-test-0123456789abcdef"


def _client(server: FakeOpenAIServer, sleeps: list[float] | None = None, **config: object) -> LLMClient:
    recorder = sleeps.append if sleeps is not None else (lambda s: None)
    return LLMClient(server.llm_config(api_key=KEY, **config), sleep=recorder, backoff_base_s=0.01,
                     rng=random.Random(3))


def _choice_body(content: object, finish: object = "stop", usage: object = None) -> bytes:
    body: dict[str, object] = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                            "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode()


@pytest.mark.parametrize(("raw", "expected"), [
    (b"<html><body>Open WebUI</body></html>", "a body that is not JSON ('<html><body>Open WebUI</body></html>')"),
    (b"", "an empty body"),
    (b"\xff\xfe\x00\x01", "a body that is not JSON"),
])
def test_a_200_that_is_not_json_is_an_llm_error_naming_the_body(fake_openai: Factory, raw: bytes,
                                                                 expected: str) -> None:
    server = fake_openai(lambda body: Reply.body(raw))
    with pytest.raises(LLMError) as info:
        _client(server).complete(MESSAGES)
    assert expected in str(info.value)
    assert "base URL" in str(info.value) and info.value.status_code == 200
    assert len(server.requests) == 1  # the same URL answers the same way: no retry


@pytest.mark.parametrize("raw", [b'{"object": "list"}', b'[1, 2]', b'{"choices": "none"}', b'{"choices": [1]}'])
def test_json_without_usable_choices_is_an_llm_error(fake_openai: Factory, raw: bytes) -> None:
    server = fake_openai(lambda body: Reply.body(raw))
    with pytest.raises(LLMError, match="no choices|content"):
        _client(server).complete(MESSAGES)


def test_content_that_is_not_text_is_an_llm_error(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.body(_choice_body({"a": 1})))
    with pytest.raises(LLMError, match="content is not text"):
        _client(server).complete(MESSAGES)


def test_content_parts_are_joined(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.body(_choice_body([{"type": "text", "text": "he"},
                                                               {"type": "text", "text": "llo"}])))
    assert _client(server).complete(MESSAGES).text == "hello"


def test_bytes_that_are_not_utf8_are_replaced_not_fatal(fake_openai: Factory) -> None:
    raw = _choice_body("cafe").replace(b"cafe", b"caf\xe9")
    server = fake_openai(lambda body: Reply.body(raw))
    assert _client(server).complete(MESSAGES).text == "caf\ufffd"


def test_usage_that_is_not_numbers_counts_zero(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.body(_choice_body("a", usage={"prompt_tokens": "x",
                                                                           "completion_tokens": None})))
    reply = _client(server).complete(MESSAGES)
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("a", 0, 0)


def test_finish_reason_is_kept(fake_openai: Factory) -> None:
    server = fake_openai(scripted([Reply.cut("The answer was"), Reply.ok("whole")]))
    client = _client(server)
    cut = client.complete(MESSAGES)
    assert cut.finish_reason == "length" and cut.cut_off
    whole = client.complete(MESSAGES)
    assert whole.finish_reason == "stop" and not whole.cut_off


def test_a_hanging_server_is_retried_once_not_max_retries_times(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.slow(5.0))
    sleeps: list[float] = []
    with pytest.raises(LLMError) as info:
        _client(server, sleeps, timeout_s=0.3, max_retries=4).complete(MESSAGES)
    assert len(server.requests) == 2 and len(sleeps) == 1
    assert "no answer within 0.3 s (MRAG_LLM_TIMEOUT), twice" in str(info.value)
    assert info.value.attempts == 2 and info.value.status_code is None


def test_a_500_html_page_is_retried_and_reported_without_the_key(fake_openai: Factory) -> None:
    server = fake_openai(lambda body: Reply.body(f"<html>proxy error for key {KEY}</html>".encode(), status=500))
    sleeps: list[float] = []
    with pytest.raises(LLMError) as info:
        _client(server, sleeps, max_retries=2).complete(MESSAGES)
    assert len(server.requests) == 3 and len(sleeps) == 2
    assert "HTTP 500" in str(info.value) and KEY not in str(info.value)


def test_a_400_for_one_request_does_not_turn_json_mode_off(fake_openai: Factory) -> None:
    # a document too long for the context is refused with or without JSON mode: JSON mode is not to blame
    def respond(body: dict) -> Reply:
        if "too long" in body["messages"][-1]["content"]:
            return Reply.error(400, "maximum context length exceeded")
        return Reply.ok('{"a": 1}')

    server = fake_openai(respond)
    client = _client(server)
    with pytest.raises(LLMError, match="context length"):
        client.complete([{"role": "user", "content": "too long"}], json_mode=True)
    assert client.json_mode_supported
    client.complete(MESSAGES, json_mode=True)
    assert [("response_format" in b) for b in server.requests] == [True, False, True]
