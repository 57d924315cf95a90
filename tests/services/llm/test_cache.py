"""Tests for services.llm.cache: keys, memory/JSON-file caches, cached_complete against a real HTTP server."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from services.llm.cache import (
    CacheError,
    JsonFileCache,
    LLMCache,
    MemoryCache,
    cache_key,
    cached_complete,
)
from services.llm.client import LLMClient, LLMReply
from services.reader import ReaderDoc, RemoteGenerator
from tests.support.openai_server import FakeOpenAIServer, Reply, scripted

MSGS = [{"role": "user", "content": "hi"}]
REPLY = LLMReply(text="hello", prompt_tokens=3, completion_tokens=1, latency_s=0.25, model="m")


def test_cache_key_is_sha256_of_canonical_json() -> None:
    canonical = '{"kind":"hyde","messages":[{"content":"hi","role":"user"}],"model":"m","params":{}}'
    assert cache_key("m", "hyde", MSGS) == hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def test_cache_key_params_none_dropped_and_sorted() -> None:
    canonical = (
        '{"kind":"k","messages":[{"content":"hi","role":"user"}],"model":"m",'
        '"params":{"json_mode":false,"temperature":0.5}}'
    )
    key = cache_key("m", "k", MSGS, {"temperature": 0.5, "max_tokens": None, "json_mode": False})
    assert key == hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def test_cache_key_changes_with_each_part() -> None:
    base = cache_key("m", "hyde", MSGS, {"temperature": 0.0})
    assert cache_key("m", "hyde", MSGS, {"temperature": 0.0}) == base
    others = {
        cache_key("m2", "hyde", MSGS, {"temperature": 0.0}),
        cache_key("m", "intent", MSGS, {"temperature": 0.0}),
        cache_key("m", "hyde", [{"role": "user", "content": "hi!"}], {"temperature": 0.0}),
        cache_key("m", "hyde", MSGS, {"temperature": 0.7}),
    }
    assert base not in others and len(others) == 4


def test_memory_cache_roundtrip() -> None:
    cache = MemoryCache()
    assert isinstance(cache, LLMCache)
    assert cache.get("k") is None
    cache.put("k", "hyde", "m", REPLY)
    assert cache.get("k") == REPLY
    assert len(cache) == 1


def test_json_file_cache_persists_and_writes_atomically(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "cache.json"
    cache = JsonFileCache(path)
    assert isinstance(cache, LLMCache)
    assert cache.get("k") is None
    assert not path.exists()
    cache.put("k", "hyde", "m", REPLY)
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    assert on_disk == {
        "k": {
            "kind": "hyde",
            "model": "m",
            "reply": {"text": "hello", "prompt_tokens": 3, "completion_tokens": 1, "latency_s": 0.25, "model": "m",
                      "finish_reason": None},
        }
    }
    assert sorted(p.name for p in path.parent.iterdir()) == ["cache.json"]  # no temp file left behind
    reopened = JsonFileCache(path)
    assert reopened.get("k") == REPLY
    reopened.put("k2", "intent", "m", REPLY)
    assert sorted(json.loads(path.read_text(encoding="utf-8"))) == ["k", "k2"]


def test_json_file_cache_rejects_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(CacheError, match="cannot be read"):
        JsonFileCache(path).get("k")
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(CacheError, match="not an LLM cache"):
        JsonFileCache(path).get("k")
    assert path.read_text(encoding="utf-8") == "[1, 2]"  # never overwritten


def _client(server: FakeOpenAIServer) -> LLMClient:
    return LLMClient(server.llm_config(), sleep=lambda s: None)


def test_cached_complete_hit_makes_no_request() -> None:
    with FakeOpenAIServer(scripted([Reply.ok("answer one", prompt_tokens=11, completion_tokens=2)])) as server:
        client = _client(server)
        cache = MemoryCache()
        first, hit1 = cached_complete(client, cache, "hyde", MSGS)
        assert (first.text, first.prompt_tokens, first.completion_tokens, hit1) == ("answer one", 11, 2, False)
        assert len(server.requests) == 1
        second, hit2 = cached_complete(client, cache, "hyde", MSGS)
        assert len(server.requests) == 1  # served from the cache
        assert hit2 is True
        assert second.latency_s == 0.0
        assert (second.text, second.prompt_tokens, second.completion_tokens) == ("answer one", 11, 2)


def test_cached_complete_params_are_part_of_the_key() -> None:
    with FakeOpenAIServer(scripted(["cold", "warm"])) as server:
        client = _client(server)
        cache = MemoryCache()
        assert cached_complete(client, cache, "k", MSGS, temperature=0.0)[0].text == "cold"
        reply, hit = cached_complete(client, cache, "k", MSGS, temperature=0.9)
        assert (reply.text, hit) == ("warm", False)
        assert [r["temperature"] for r in server.requests] == [0.0, 0.9]


def test_cached_complete_without_cache_always_calls() -> None:
    with FakeOpenAIServer(scripted(["a", "b"])) as server:
        client = _client(server)
        assert cached_complete(client, None, "k", MSGS)[0].text == "a"
        reply, hit = cached_complete(client, None, "k", MSGS)
        assert (reply.text, hit, len(server.requests)) == ("b", False, 2)


def test_cached_complete_does_not_store_blank_or_rejected_replies() -> None:
    with FakeOpenAIServer(scripted(["   ", "bad", "good", "never sent"])) as server:
        client = _client(server)
        cache = MemoryCache()
        accept = lambda r: r.text != "bad"  # noqa: E731
        assert cached_complete(client, cache, "k", MSGS, accept=accept)[0].text == "   "
        assert cached_complete(client, cache, "k", MSGS, accept=accept)[0].text == "bad"
        assert cached_complete(client, cache, "k", MSGS, accept=accept)[0].text == "good"
        reply, hit = cached_complete(client, cache, "k", MSGS, accept=accept)
        assert (reply.text, hit, len(server.requests), len(cache)) == ("good", True, 3, 1)


def test_json_file_cache_survives_a_new_run(tmp_path: Path) -> None:
    path = tmp_path / "llm-cache.json"
    with FakeOpenAIServer(scripted(["persisted"])) as server:
        cached_complete(_client(server), JsonFileCache(path), "fusion", MSGS)
        reply, hit = cached_complete(_client(server), JsonFileCache(path), "fusion", MSGS)
        assert (reply.text, hit, len(server.requests)) == ("persisted", True, 1)


def test_json_file_cache_batched_flush(tmp_path: Path) -> None:
    path = tmp_path / "batch.json"
    with JsonFileCache(path, autoflush=False) as cache:
        cache.put("a", "hyde", "m", REPLY)
        cache.put("b", "hyde", "m", REPLY)
        assert cache.get("b") == REPLY
        assert not path.exists()  # nothing written until flush / end of block
    assert sorted(json.loads(path.read_text(encoding="utf-8"))) == ["a", "b"]
    assert JsonFileCache(path).get("a") == REPLY


def test_cut_off_answer_stays_cut_off_when_read_back_from_the_file(tmp_path: Path) -> None:
    """The endpoint stopped the answer at its token limit: the copy in the cache says so too, after a restart."""
    path = tmp_path / "llm-cache.json"
    with FakeOpenAIServer(scripted([Reply.cut("The Moon orbits the", completion_tokens=4)])) as server:
        fresh, hit1 = cached_complete(_client(server), JsonFileCache(path), "reader", MSGS, max_tokens=4)
        again, hit2 = cached_complete(_client(server), JsonFileCache(path), "reader", MSGS, max_tokens=4)
        assert len(server.requests) == 1
    assert (hit1, hit2) == (False, True)
    assert (fresh.finish_reason, fresh.cut_off) == ("length", True)
    assert (again.text, again.finish_reason, again.cut_off) == ("The Moon orbits the", "length", True)
    (entry,) = json.loads(path.read_text(encoding="utf-8")).values()
    assert entry["reply"]["finish_reason"] == "length"


def test_reader_flags_a_cut_answer_alike_fresh_and_from_the_cache(tmp_path: Path) -> None:
    """The reader (a consumer that checks truncation) reports ``cut_off`` for the cached copy as for the fresh one."""
    path = tmp_path / "llm-cache.json"
    docs = [ReaderDoc("Moon", "Astronomy", "The Moon orbits the Earth.")]
    with FakeOpenAIServer(scripted([Reply.cut("The Moon orbits", completion_tokens=3)])) as server:
        fresh = RemoteGenerator(_client(server), JsonFileCache(path)).answer("What orbits?", docs, max_new_tokens=50)
        cached = RemoteGenerator(_client(server), JsonFileCache(path)).answer("What orbits?", docs, max_new_tokens=50)
        assert len(server.requests) == 1
    assert (fresh.cached, fresh.cut_off) == (False, True)
    assert (cached.cached, cached.cut_off, cached.text) == (True, True, fresh.text)


def test_entries_written_before_finish_reason_was_stored_read_as_none(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    old = {"text": "hello", "prompt_tokens": 3, "completion_tokens": 1, "latency_s": 0.25, "model": "m"}
    bad = dict(old, finish_reason=7)
    path.write_text(json.dumps({"old": {"kind": "hyde", "model": "m", "reply": old},
                                "bad": {"kind": "hyde", "model": "m", "reply": bad}}), encoding="utf-8")
    cache = JsonFileCache(path)
    assert cache.get("old") == REPLY and REPLY.finish_reason is None and not REPLY.cut_off
    assert cache.get("bad") is None  # a malformed entry counts as missing (asked again, never replayed wrong)
