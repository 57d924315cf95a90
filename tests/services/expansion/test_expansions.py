"""Tests for the LLM expansions against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import pytest

from services.expansion import (
    ExpansionError,
    fusion_subqueries,
    hypothetical_passage,
    intent_statements,
    rewrite_queries,
)
from services.expansion.intent import parse_intent_answer
from services.llm.cache import MemoryCache
from services.llm.client import LLMClient, LLMError
from tests.support.openai_server import FakeOpenAIServer, Reply, scripted

Q = "Which planets have no moons?"


def client_for(server: FakeOpenAIServer) -> LLMClient:
    return LLMClient(server.llm_config(max_retries=0), sleep=lambda s: None)


def prompt_of(server: FakeOpenAIServer, i: int = 0) -> str:
    return server.requests[i]["messages"][-1]["content"]


# -- multi-query ---------------------------------------------------------------------------------


def test_rewrite_queries_parse_dedupe_clamp_and_cache_hit() -> None:
    answer = ("Here are the rewrites:\n1. planets without moons\n\n2) moonless planets\n- Planets without moons!\n"
              "* \"Mercury Venus satellites\"\n5. extra query")
    with FakeOpenAIServer(scripted([Reply.ok(answer, prompt_tokens=50, completion_tokens=20)])) as server:
        client, cache = client_for(server), MemoryCache()
        first = rewrite_queries(client, Q, n=3, cache=cache)
        assert first.texts == ["planets without moons", "moonless planets", "Mercury Venus satellites"]
        assert (first.prompt_tokens, first.completion_tokens, first.cached) == (50, 20, False)
        assert "into 3 diverse search queries" in prompt_of(server) and prompt_of(server).endswith(f"Question: {Q}")
        second = rewrite_queries(client, Q, n=3, cache=cache)
        assert len(server.requests) == 1  # no HTTP request for the repeat
        assert (second.texts, second.cached, second.latency_s) == (first.texts, True, 0.0)


def test_rewrite_queries_unparseable_raises_and_is_not_cached() -> None:
    with FakeOpenAIServer(scripted(["\n  \n", "Sure:\n", "planets lacking natural satellites"])) as server:
        client, cache = client_for(server), MemoryCache()
        with pytest.raises(ExpansionError, match="no search queries"):
            rewrite_queries(client, Q, cache=cache)
        with pytest.raises(ExpansionError, match="no search queries: 'Sure:'"):
            rewrite_queries(client, Q, cache=cache)
        assert len(cache) == 0
        assert rewrite_queries(client, Q, cache=cache).texts == ["planets lacking natural satellites"]
        assert len(server.requests) == 3


def test_rewrite_numbering_only_is_unusable_and_the_error_carries_its_cost() -> None:
    from services.expansion.multi_query import parse_rewrites

    assert parse_rewrites("1.\n\n2) planets without moons\n3.\n-", 5) == ["planets without moons"]
    with FakeOpenAIServer(scripted([Reply.ok("1.\n\n2.\n", prompt_tokens=17, completion_tokens=3)])) as server:
        client, cache = client_for(server), MemoryCache()
        with pytest.raises(ExpansionError, match="no search queries") as info:
            rewrite_queries(client, Q, cache=cache)
        assert (info.value.prompt_tokens, info.value.completion_tokens) == (17, 3)
        assert info.value.answer == "1.\n\n2.\n" and info.value.latency_s > 0
        assert len(cache) == 0


def test_rewrite_queries_validates_arguments() -> None:
    with FakeOpenAIServer(scripted([])) as server:
        with pytest.raises(ValueError, match="between 1 and 10"):
            rewrite_queries(client_for(server), Q, n=0)
        with pytest.raises(ValueError, match="empty"):
            rewrite_queries(client_for(server), "  ")
        assert server.requests == []


# -- HyDE ----------------------------------------------------------------------------------------


def test_hypothetical_passage_cleaned_and_cached() -> None:
    answer = 'Passage: "Mercury and Venus are the only planets\nin the Solar System without natural satellites."'
    with FakeOpenAIServer(scripted([answer])) as server:
        client, cache = client_for(server), MemoryCache()
        result = hypothetical_passage(client, Q, cache=cache)
        assert result.texts == [
            "Mercury and Venus are the only planets in the Solar System without natural satellites."
        ]
        assert server.requests[0]["max_tokens"] == 300
        again = hypothetical_passage(client, Q, cache=cache)
        assert (again.cached, again.texts, len(server.requests)) == (True, result.texts, 1)


def test_parse_passage_labels() -> None:
    from services.expansion.hyde import parse_passage

    assert parse_passage("**Passage:** Mercury has no moons at all.") == ["Mercury has no moons at all."]
    assert parse_passage("```\nMercury has no moons at all.\n```") == ["Mercury has no moons at all."]
    # "Passage" as the first word of real content (no colon) is kept
    assert parse_passage("Passage of the Reform Act changed voting.") == ["Passage of the Reform Act changed voting."]


def test_hypothetical_passage_too_short_raises() -> None:
    with FakeOpenAIServer(scripted(["I don't know."])) as server:
        with pytest.raises(ExpansionError, match="too short to be a hypothetical passage"):
            hypothetical_passage(client_for(server), Q)


# -- intent statements ---------------------------------------------------------------------------

INTENT_JSON = (
    'Sure! ```json\n{"answers": [{"answer": "Mercury", "statements": ["Mercury has no moons.", '
    '"Mercury is closest to the Sun."]}, {"answer": "Venus", "statements": ["Venus has no moons.", '
    '"mercury has no moons"]}, {"answer": "Pluto is a dwarf planet with moons", "statements": []}]}\n``` '
    "Hope this helps {not json}"
)


def test_intent_statements_json_mode_fenced_json_flattened_deduped() -> None:
    with FakeOpenAIServer(scripted([INTENT_JSON])) as server:
        client, cache = client_for(server), MemoryCache()
        result = intent_statements(client, Q, n_answers=3, cache=cache)
        assert server.requests[0]["response_format"] == {"type": "json_object"}
        assert "Give 3 distinct plausible answers" in prompt_of(server)
        again = intent_statements(client, Q, n_answers=3, cache=cache)
        assert (again.cached, len(server.requests)) == (True, 1)
    assert result.texts == [
        "Mercury has no moons.",
        "Mercury is closest to the Sun.",
        "Venus has no moons.",
        "Pluto is a dwarf planet with moons",  # no statements -> the answer itself
    ]


def test_parse_intent_answer_shapes_and_fallback() -> None:
    assert parse_intent_answer('[{"answer": "a", "statements": ["s1", "s2"]}, "plain answer"] trailing') == [
        "s1", "s2", "plain answer",
    ]
    assert parse_intent_answer('{"statements": ["only statements"]}') == ["only statements"]
    lines = "Answer 1: Mercury has no moons at all\n- Statement: Venus lacks natural satellites\n{\nok\n"
    assert parse_intent_answer(lines) == ["Mercury has no moons at all", "Venus lacks natural satellites"]
    with pytest.raises(ExpansionError, match="no intent statements"):
        parse_intent_answer('{"answers": []}')


def test_intent_statements_garbage_raises() -> None:
    with FakeOpenAIServer(scripted(['{"result": "none"}'])) as server:
        with pytest.raises(ExpansionError, match="no intent statements"):
            intent_statements(client_for(server), Q)


# -- fusion sub-queries --------------------------------------------------------------------------


def test_fusion_subqueries_and_kinds_do_not_collide_in_a_shared_cache() -> None:
    with FakeOpenAIServer(scripted(["1. moons of Mercury\n2. moons of Venus\n3. moons of Mars", "x y"])) as server:
        client, cache = client_for(server), MemoryCache()
        result = fusion_subqueries(client, Q, 2, cache=cache)
        assert result.texts == ["moons of Mercury", "moons of Venus"]
        assert "Write exactly 2 short" in prompt_of(server) and prompt_of(server).endswith(f"Text:\n{Q}")
        assert fusion_subqueries(client, Q, 2, cache=cache).cached is True
        # a different kind on the same question is a different cache entry -> a new request
        assert rewrite_queries(client, Q, n=2, cache=cache).texts == ["x y"]
        assert len(server.requests) == 2


def test_http_errors_propagate_as_llm_error() -> None:
    with FakeOpenAIServer(scripted([Reply.error(401, "bad key")])) as server:
        with pytest.raises(LLMError, match="HTTP 401: bad key"):
            fusion_subqueries(client_for(server), Q, 3)
