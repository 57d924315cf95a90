"""StoreLLMCache (the LLM answer cache on the app's store) keeps what an answer was: its text, token counts and
whether the endpoint cut it at the token limit (``finish_reason``), across a reopened store."""

from __future__ import annotations

import pytest

import db
from services.llm.cache import cache_key, cached_complete
from services.llm.client import LLMClient, LLMReply
from services.reader import ReaderDoc, RemoteGenerator
from services.workflows.llm_cache import StoreLLMCache
from tests.support.openai_server import FakeOpenAIServer, Reply, scripted

MSGS = [{"role": "user", "content": "hi"}]
DOCS = [ReaderDoc("Moon", "Astronomy", "The Moon orbits the Earth.")]


def _client(server: FakeOpenAIServer) -> LLMClient:
    return LLMClient(server.llm_config(max_retries=0), sleep=lambda _s: None)


@pytest.mark.every_backend
def test_a_cut_off_answer_reads_back_cut_off(store: db.Store) -> None:
    """The endpoint stopped the answer at its token limit: the stored copy says so too."""
    with FakeOpenAIServer(scripted([Reply.cut("The Moon orbits the", completion_tokens=4)])) as server:
        fresh, hit1 = cached_complete(_client(server), StoreLLMCache(store), "reader", MSGS, max_tokens=4)
        again, hit2 = cached_complete(_client(server), StoreLLMCache(store), "reader", MSGS, max_tokens=4)
        assert len(server.requests) == 1
    assert (hit1, hit2) == (False, True)
    assert (fresh.finish_reason, fresh.cut_off) == ("length", True)
    assert (again.text, again.completion_tokens, again.finish_reason, again.cut_off) == (
        "The Moon orbits the", 4, "length", True)


def test_the_reader_flags_a_cut_answer_alike_fresh_and_from_the_store(store: db.Store) -> None:
    with FakeOpenAIServer(scripted([Reply.cut("The Moon orbits", completion_tokens=3)])) as server:
        fresh = RemoteGenerator(_client(server), StoreLLMCache(store)).answer("What orbits?", DOCS, max_new_tokens=50)
        cached = RemoteGenerator(_client(server), StoreLLMCache(store)).answer("What orbits?", DOCS, max_new_tokens=50)
        assert len(server.requests) == 1
    assert (fresh.cached, fresh.cut_off) == (False, True)
    assert (cached.cached, cached.cut_off, cached.text) == (True, True, fresh.text)


def test_a_whole_answer_reads_back_whole(store: db.Store) -> None:
    with FakeOpenAIServer(scripted([Reply.ok("The Moon orbits the Earth.", completion_tokens=5)])) as server:
        cached_complete(_client(server), StoreLLMCache(store), "reader", MSGS)
        again, hit = cached_complete(_client(server), StoreLLMCache(store), "reader", MSGS)
        assert len(server.requests) == 1
    assert (hit, again.finish_reason, again.cut_off) == (True, "stop", False)


def test_entries_written_before_finish_reason_was_stored_read_as_none(store: db.Store) -> None:
    """An entry an earlier version wrote (its request has no ``finish_reason``) is replayed, not known cut off;
    a ``finish_reason`` that is not a string counts as unknown too."""
    old, odd = cache_key("m", "hyde", MSGS), cache_key("m", "hyde", MSGS + MSGS)
    db.llm_cache_put(store, old, model="m", kind="hyde", request={"kind": "hyde", "model": "m"},
                     response_text="hello", prompt_tokens=3, completion_tokens=1, latency_s=0.25)
    db.llm_cache_put(store, odd, model="m", kind="hyde", request={"kind": "hyde", "model": "m", "finish_reason": 7},
                     response_text="hello", prompt_tokens=3, completion_tokens=1, latency_s=0.25)
    expected = LLMReply(text="hello", prompt_tokens=3, completion_tokens=1, latency_s=0.25, model="m")
    assert StoreLLMCache(store).get(old) == expected and expected.finish_reason is None
    assert StoreLLMCache(store).get(odd) == expected


def test_the_stored_request_names_kind_model_and_finish_reason_only(store: db.Store) -> None:
    key = cache_key("m", "reader", MSGS)
    reply = LLMReply(text="cut", prompt_tokens=2, completion_tokens=1, latency_s=0.5, model="m", finish_reason="length")
    StoreLLMCache(store).put(key, "reader", "m", reply)
    entry = db.llm_cache_get(store, key)
    assert entry is not None
    assert entry.request == {"kind": "reader", "model": "m", "finish_reason": "length"}
