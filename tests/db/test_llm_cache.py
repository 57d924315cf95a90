"""LLM response cache: deterministic keys, round trip, no credentials stored."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import db
from db import Store

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "label this"}]


def test_cache_key_is_deterministic_and_sensitive() -> None:
    key = db.llm_cache_key("gpt-x", "label", MESSAGES)
    assert len(key) == 64 and key == db.llm_cache_key(
        "gpt-x", "label", [dict(reversed(list(m.items()))) for m in MESSAGES]
    )
    assert key != db.llm_cache_key("gpt-y", "label", MESSAGES)
    assert key != db.llm_cache_key("gpt-x", "query", MESSAGES)
    assert key != db.llm_cache_key("gpt-x", "label", MESSAGES[:1])


def test_put_get_replace_stats_and_clear(store: Store) -> None:
    key = db.llm_cache_key("gpt-x", "label", MESSAGES)
    assert db.llm_cache_get(store, key) is None
    db.llm_cache_put(
        store, key, model="gpt-x", kind="label",
        request={"messages": MESSAGES, "temperature": 0, "max_tokens": 5},
        response_text="sport", prompt_tokens=12, completion_tokens=1, latency_s=0.25,
    )
    hit = db.llm_cache_get(store, key)
    assert hit is not None
    assert (hit.model, hit.kind, hit.response_text, hit.prompt_tokens, hit.completion_tokens, hit.latency_s) == (
        "gpt-x", "label", "sport", 12, 1, 0.25,
    )
    assert hit.request == {"messages": MESSAGES, "temperature": 0, "max_tokens": 5}

    db.llm_cache_put(store, key, model="gpt-x", kind="label", request={}, response_text="politics", prompt_tokens=3)
    assert db.llm_cache_get(store, key).response_text == "politics"  # type: ignore[union-attr]

    other = db.llm_cache_key("small", "label", MESSAGES)
    db.llm_cache_put(
        store, other, model="small", kind="label", request={}, response_text="x", prompt_tokens=4, completion_tokens=2
    )
    stats = db.llm_cache_stats(store)
    assert (stats.n_entries, stats.prompt_tokens, stats.completion_tokens) == (2, 7, 2)
    assert db.llm_cache_clear(store, model="small") == 1
    assert db.llm_cache_get(store, other) is None and db.llm_cache_get(store, key) is not None
    assert db.llm_cache_clear(store) == 1
    assert db.llm_cache_stats(store).n_entries == 0


def test_credentials_are_never_stored(store: Store, db_path: Path) -> None:
    key = db.llm_cache_key("gpt-x", "label", MESSAGES)
    secret = "sk-THIS-MUST-NOT-BE-STORED"
    db.llm_cache_put(
        store, key, model="gpt-x", kind="label",
        request={
            "messages": MESSAGES,
            "api_key": secret,
            "Authorization": f"Bearer {secret}",
            "client": {"base_url": "http://localhost", "API_KEY": secret, "default_headers": {"x": secret}},
            "max_tokens": 3,
        },
        response_text="ok",
    )
    stored = db.llm_cache_get(store, key).request  # type: ignore[union-attr]
    assert stored == {"messages": MESSAGES, "client": {"base_url": "http://localhost"}, "max_tokens": 3}
    store.close()
    raw = sqlite3.connect(db_path)
    try:
        dump = "\n".join(raw.iterdump())
    finally:
        raw.close()
    assert secret not in dump


def test_bad_key_is_refused(store: Store) -> None:
    with pytest.raises(db.InvalidInputError, match="sha256"):
        db.llm_cache_put(store, "not-a-hash", model="m", kind="k", request={}, response_text="x")
