"""Chatty LLM answers to the Multi-Query, Fusion and intent prompts: the preamble, the sign-off and remarks are
never taken for queries or statements; clean answers parse as before; an answer with nothing usable gets the
expansions' "contains no ..." error (not cached, its tokens counted). End to end against a real local server."""

from __future__ import annotations

import pytest

from services.expansion import ExpansionError, intent_statements, rewrite_queries
from services.expansion.fusion_queries import parse_subqueries
from services.expansion.intent import parse_intent_answer
from services.expansion.multi_query import parse_rewrites
from services.llm.cache import MemoryCache
from services.llm.client import LLMClient
from services.llm_strategies import expand_one
from tests.support.openai_server import FakeOpenAIServer, Reply, scripted

Q = "Which moons orbit Mars?"
CHATTY_REWRITES = (
    "Sure! Here are three search queries:\n"
    "1. moons of Mars\n"
    "2. **Phobos** and Deimos orbits\n"
    '3. "natural satellites of the red planet"\n'
    "Let me know if you need more!"
)
REWRITES = ["moons of Mars", "Phobos and Deimos orbits", "natural satellites of the red planet"]


def test_chatty_rewrites_keep_only_the_numbered_queries() -> None:
    assert parse_rewrites(CHATTY_REWRITES, 5) == REWRITES
    assert parse_rewrites(CHATTY_REWRITES, 2) == REWRITES[:2]


def test_clean_rewrites_one_per_line_parse_as_before() -> None:
    assert parse_rewrites("\n".join(REWRITES), 4) == REWRITES


def test_a_plain_list_between_preamble_and_sign_off_loses_both() -> None:
    answer = "Here are the rewrites:\nmoons of Mars\nPhobos and Deimos orbits\nI hope this helps!"
    assert parse_rewrites(answer, 4) == ["moons of Mars", "Phobos and Deimos orbits"]


@pytest.mark.parametrize(
    "answer",
    ["Sure! Here are some queries:\n\nLet me know if you need more!", "1.\n2.\nHope this helps.", "## Queries\n"],
)
def test_rewrites_with_only_chatter_do_not_parse(answer: str) -> None:
    with pytest.raises(ExpansionError, match="contains no search queries"):
        parse_rewrites(answer, 4)


def test_fusion_sub_queries_are_parsed_by_the_same_rule() -> None:
    assert parse_subqueries(CHATTY_REWRITES, 3) == REWRITES
    with pytest.raises(ExpansionError, match="contains no sub-queries"):
        parse_subqueries("Certainly!\n2.\n", 3)


def test_intent_statements_in_prose_keep_only_the_listed_statements() -> None:
    answer = (
        "Certainly! The question could mean two things:\n"
        "- Answer 1: Phobos orbits Mars closely\n"
        "- Statement: Deimos is the outer moon of Mars\n"
        "These statements cover both intents.\n"
        "Let me know if you need anything else!"
    )
    assert parse_intent_answer(answer) == ["Phobos orbits Mars closely", "Deimos is the outer moon of Mars"]


def test_intent_json_wrapped_in_prose_reads_the_json() -> None:
    answer = 'Here you go:\n{"answers": [{"answer": "Phobos", "statements": ["Phobos orbits Mars."]}]}\nHope it helps!'
    assert parse_intent_answer(answer) == ["Phobos orbits Mars."]


def test_intent_answer_with_only_chatter_does_not_parse() -> None:
    answer = 'Sure! Here is the JSON:\n{"answers": []}\nLet me know if you need anything else!'
    with pytest.raises(ExpansionError, match="contains no intent statements"):
        parse_intent_answer(answer)


def _client(server: FakeOpenAIServer) -> LLMClient:
    return LLMClient(server.llm_config(max_retries=0), sleep=lambda s: None)


def test_end_to_end_chatty_answers_parse_and_cache_only_what_is_usable() -> None:
    unusable = "Sure! Here are some queries:\n\nLet me know if you need more!"
    intent_chat = "Of course!\n1. Phobos orbits Mars closely\n2. Deimos is the outer moon of Mars\nHope this helps!"
    replies = [Reply.ok(CHATTY_REWRITES), Reply.ok(unusable, prompt_tokens=40, completion_tokens=9),
               Reply.ok(intent_chat)]
    with FakeOpenAIServer(scripted(replies)) as server:
        client, cache = _client(server), MemoryCache()
        first = rewrite_queries(client, Q, 4, cache)
        again = rewrite_queries(client, Q, 4, cache)
        assert (first.texts, again.texts, again.cached) == (REWRITES, REWRITES, True)
        failed = expand_one(client, "multi-query", "Which planets have rings?", cache=cache)
        assert failed.error is not None and failed.error.startswith(
            "unusable LLM answer: The LLM answer contains no search queries: 'Sure! Here are some queries:")
        assert (failed.texts, failed.prompt_tokens, failed.completion_tokens) == ((), 40, 9)
        statements = intent_statements(client, Q, 2, cache)
        assert statements.texts == ["Phobos orbits Mars closely", "Deimos is the outer moon of Mars"]
        assert len(server.requests) == 3 and len(cache) == 2  # the unusable answer was not stored
