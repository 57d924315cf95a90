"""Query generation against a real local server whose answers do not fit a query: a 200 KB story (stored as the
query before, 'ok' when it named every title), a story or sub-queries cut at the token limit."""

from __future__ import annotations

from typing import Callable

from services.llm.client import LLMClient
from services.querygen.generate import generate_queries
from services.querygen.sampling import QueryPlan
from tests.support.mini_corpus import TWO_DOCS
from tests.support.openai_server import FakeOpenAIServer, Reply, fake_openai, scripted

__all__ = ["fake_openai"]

Factory = Callable[..., FakeOpenAIServer]


DOCS = TWO_DOCS
PLAN = QueryPlan(2, ("1", "2"))
STORY = "Our probe to the Moon found ice near the pole, while the team on Mars saw a dust storm grow."


def _generate(server: FakeOpenAIServer, want_fusion: bool = False):  # noqa: ANN202
    client = LLMClient(server.llm_config(max_retries=0), sleep=lambda s: None)
    (query,) = generate_queries([PLAN], DOCS, client=client, want_fusion=want_fusion, n_fusion=3)
    return query


def test_a_200_kb_story_fails_and_is_not_stored_as_the_query(fake_openai: Factory) -> None:
    # every sentence different, every title named: no loop, no missing title - it passed as 'ok'
    huge = " ".join(f"Note {i}: the Moon and Mars were observed on night {i}." for i in range(4000))
    query = _generate(fake_openai(lambda body: huge))
    assert len(huge) > 200_000
    assert query.status == "failed" and query.text is None
    assert "too long to be a query about 2 article(s)" in (query.error or "")
    assert "at most 6,000 expected" in (query.error or "")


def test_a_story_cut_at_the_token_limit_is_flagged(fake_openai: Factory) -> None:
    query = _generate(fake_openai(lambda body: Reply.cut(STORY)))
    assert query.status == "flagged" and query.text == STORY
    assert "cut off at the endpoint's token limit" in (query.error or "")


def test_the_sub_query_cut_in_half_is_dropped(fake_openai: Factory) -> None:
    server = fake_openai(scripted([STORY, Reply.cut("Ice near the Moon's pole\nDust storms on Mars\nWhat did the")]))
    query = _generate(server, want_fusion=True)
    assert query.fusion == ("Ice near the Moon's pole", "Dust storms on Mars")
    assert query.status == "flagged" and "3 asked for, the LLM gave 2" in (query.error or "")
