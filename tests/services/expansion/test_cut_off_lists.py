"""An LLM answer cut at the endpoint's token limit (``finish_reason: "length"``) ends in a half-written item: the
Multi-Query and Fusion expansions drop its last item, as query generation's Fusion sub-queries do
(:mod:`services.querygen.generate`), and keep every item of a whole answer; intent drops the last statement of its
line fallback (JSON statements decode whole or not at all). Hand-written answers, then end to end
through a real local server and the cache (a replayed cut answer parses alike)."""

from __future__ import annotations

import pytest

from services.expansion import ExpansionError, fusion_subqueries, rewrite_queries
from services.expansion.common import parse_list
from services.expansion.fusion_queries import parse_subqueries
from services.expansion.multi_query import parse_rewrites
from services.llm.cache import MemoryCache
from services.llm.client import LLMClient
from tests.support.openai_server import FakeOpenAIServer, Reply, scripted

Q = "Which moons orbit Mars?"
CUT = "1. moons of Mars\n2. Phobos and Deimos orbits\n3. natural satellites of the re"
WHOLE = ["moons of Mars", "Phobos and Deimos orbits", "natural satellites of the re"]


def test_a_cut_answer_loses_its_half_written_last_item() -> None:
    assert parse_rewrites(CUT, 5, cut_off=True) == WHOLE[:2]
    assert parse_subqueries(CUT, 5, cut_off=True) == WHOLE[:2]
    assert parse_rewrites(CUT, 5) == WHOLE  # not cut: every item counts (the last one is whole)
    assert parse_subqueries(CUT, 5, cut_off=False) == WHOLE


def test_the_cut_item_is_dropped_before_the_list_is_clamped() -> None:
    """Five items asked for four, cut in the fifth: the first four are whole and all kept."""
    answer = "- Phobos\n- Deimos\n- Mars moons\n- red planet satellites\n- captured aster"
    assert parse_rewrites(answer, 4, cut_off=True) == ["Phobos", "Deimos", "Mars moons", "red planet satellites"]


def test_the_cut_item_is_the_last_list_item_not_the_last_line_of_chatter() -> None:
    """Preamble lines and repeated items are no items: the dropped one is the last query the answer listed."""
    answer = "Sure! Here are the queries:\n1. moons of Mars\n2. moons of Mars\n3. Phobos orbit\n4. Deimos orb"
    assert parse_list(answer, 4, "search queries", cut_off=True) == ["moons of Mars", "Phobos orbit"]


@pytest.mark.parametrize("parse", [parse_rewrites, parse_subqueries])
def test_a_cut_answer_with_only_its_cut_item_does_not_parse(parse) -> None:
    with pytest.raises(ExpansionError, match=r"contains no .*: its only item was cut off at the token limit"):
        parse("1. moons of Ma", 3, cut_off=True)


def _client(server: FakeOpenAIServer) -> LLMClient:
    return LLMClient(server.llm_config(max_retries=0), sleep=lambda _s: None)


@pytest.mark.parametrize("expand", [
    lambda client, cache: rewrite_queries(client, Q, 5, cache),
    lambda client, cache: fusion_subqueries(client, Q, 5, cache),
], ids=["multi-query", "fusion"])
def test_a_cut_answer_from_the_server_and_from_the_cache_loses_its_last_item(expand) -> None:
    cache = MemoryCache()
    with FakeOpenAIServer(scripted([Reply.cut(CUT, completion_tokens=20)])) as server:
        fresh = expand(_client(server), cache)
        again = expand(_client(server), cache)
        assert len(server.requests) == 1
    assert (fresh.texts, fresh.cached, fresh.completion_tokens) == (WHOLE[:2], False, 20)
    assert (again.texts, again.cached) == (WHOLE[:2], True)


def test_a_cut_answer_with_nothing_whole_is_an_error_and_not_cached() -> None:
    cache = MemoryCache()
    with FakeOpenAIServer(scripted([Reply.cut("1. moons of", completion_tokens=4)])) as server:
        with pytest.raises(ExpansionError, match="cut off at the token limit") as info:
            rewrite_queries(_client(server), Q, 3, cache)
    assert (info.value.completion_tokens, len(cache)) == (4, 0)


def test_a_whole_answer_from_the_server_keeps_every_item() -> None:
    with FakeOpenAIServer(scripted([Reply.ok(CUT)])) as server:
        assert rewrite_queries(_client(server), Q, 5).texts == WHOLE


INTENT_CUT = "Mars has two small moons, Phobos and Deimos.\nPhobos orbits closer to Mars than any other moon to its pl"


def test_a_cut_intent_answer_in_lines_loses_its_half_written_last_statement() -> None:
    from services.expansion.intent import parse_intent_answer

    whole = "Mars has two small moons, Phobos and Deimos."
    assert parse_intent_answer(INTENT_CUT, cut_off=True) == [whole]
    assert parse_intent_answer(INTENT_CUT) == [whole, INTENT_CUT.splitlines()[1]]  # not cut: both count
    with pytest.raises(ExpansionError, match="its only statement was cut off at the token limit"):
        parse_intent_answer("Phobos orbits closer to Mars than any oth", cut_off=True)
    # JSON statements are whole strings: a cut JSON answer keeps the statements that decoded, none half-written
    cut_json = '{"answers": [{"answer": "a", "statements": ["Mars has two moons.", "Phobos is the larger one."]}, ' \
               '{"answer": "b", "statements": ["Deimos is sma'
    assert parse_intent_answer(cut_json, cut_off=True) == ["Mars has two moons.", "Phobos is the larger one."]


def test_a_cut_intent_answer_from_the_server_and_from_the_cache_loses_its_last_statement() -> None:
    from services.expansion import intent_statements

    cache = MemoryCache()
    with FakeOpenAIServer(scripted([Reply.cut(INTENT_CUT, completion_tokens=20)])) as server:
        fresh = intent_statements(_client(server), Q, 2, cache)
        again = intent_statements(_client(server), Q, 2, cache)
        assert len(server.requests) == 1
    assert fresh.texts == again.texts == ["Mars has two small moons, Phobos and Deimos."]
