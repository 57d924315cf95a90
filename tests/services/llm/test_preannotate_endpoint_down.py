"""Pre-annotation of a stored corpus against a real local server that is down, then back: the run stops
sending at the first endpoint-wide failure, stores what it asked (failed, with the reason, never the key),
leaves the rest to do, and the resume annotates every document, the failed ones included."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import db
from services.llm.client import LLMClient
from services.workflows import annotation as aw
from services.workflows.llm_cache import StoreLLMCache
from tests.support.mini_corpus import mini_store
from tests.support.openai_server import FakeOpenAIServer, Reply

KEY = "sk-down-0123456789abcdef"


def test_endpoint_down_then_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, store, corpus_id, doc_ids = mini_store(tmp_path, monkeypatch)
    down = threading.Event()
    down.set()

    def respond(body: dict[str, Any]) -> Reply | str:
        if down.is_set():
            return Reply.error(401, f"Incorrect API key provided: {KEY}")
        return '{"label": "space", "confidence": 0.8, "reason": "about space"}'

    with FakeOpenAIServer(respond) as server:
        config = server.llm_config(api_key=KEY, max_retries=0, concurrency=1)
        with LLMClient(config, sleep=lambda s: None) as client:
            first = aw.preannotate(store, corpus_id, aw.LLMAnnotator(client, cache=StoreLLMCache(store)),
                                   batch_size=2)
        assert len(server.requests) == 1
        # the failed document is asked again on resume: 4 left, not 3
        assert (first.ok, first.failed, first.cancelled, first.remaining) == (0, 1, True, 4)
        assert "HTTP 401" in first.errors[0] and KEY not in first.errors[0]
        stored = db.list_suggestions(store, doc_ids[0])
        assert [(s.status, s.category_id) for s in stored] == [("failed", None)]
        assert all(db.list_suggestions(store, d) == [] for d in doc_ids[1:])  # nothing half-written

        down.clear()
        with LLMClient(config, sleep=lambda s: None) as client:
            second = aw.preannotate(store, corpus_id, aw.LLMAnnotator(client, cache=StoreLLMCache(store)),
                                    batch_size=2)
        assert (second.todo, second.ok, second.failed, second.cancelled) == (4, 4, 0, False)
        assert len(server.requests) == 5
    store.close()
    assert KEY.encode() not in (tmp_path / "t.db").read_bytes()
