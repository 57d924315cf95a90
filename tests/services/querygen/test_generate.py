"""Tests for services.querygen.generate against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from services.llm.client import LLMClient
from services.querygen.checks import missing_titles
from services.querygen.generate import generate_queries, regenerate_one
from services.querygen.sampling import QueryPlan
from services.querygen.story_prompt import FUSION_PROMPT_START
from tests.support.openai_server import FakeOpenAIServer, Reply, by_content, scripted


@dataclass(frozen=True)
class Doc:
    title: str
    text: str


DOCS = {
    "m": Doc("Mercury (planet)", "Mercury is the smallest planet. Its orbit takes 88 days around the Sun."),
    "j": Doc("Jazz", "Jazz originated in New Orleans. Louis Armstrong was a famous trumpeter."),
    "v": Doc("Venus", "Venus is the hottest planet. Its thick atmosphere traps heat."),
    "p": Doc("Photosynthesis", "Plants turn light into sugar. Chlorophyll absorbs red and blue light."),
}
GOOD = (
    "On Mercury, the smallest planet whose orbit takes only 88 days, a band played Jazz all night, "
    "and the trumpeter said Louis Armstrong would have loved the echo of New Orleans in the craters."
)
MISSES_VENUS = (
    "Plants on the station used Photosynthesis to turn light into sugar, and the crew talked about "
    "how chlorophyll absorbs red and blue light while their thick-walled habitat kept the heat in."
)


def prompt_titles(prompt: str) -> list[str]:
    """Titles of the ``Article i: <title>`` lines of a story prompt."""
    return re.findall(r"^Article \d+: (.+)$", prompt, flags=re.MULTILINE)


def story_server(stories: dict[tuple[str, ...], Reply | str]) -> FakeOpenAIServer:
    """Answer each story prompt with the reply registered for its titles."""
    return FakeOpenAIServer(by_content(lambda prompt: stories[tuple(prompt_titles(prompt))]))


def client_for(server: FakeOpenAIServer) -> LLMClient:
    return LLMClient(server.llm_config(), sleep=lambda s: None)


def test_good_story_ok_and_missing_title_flagged() -> None:
    plans = [QueryPlan(2, ("m", "j")), QueryPlan(2, ("p", "v"))]
    stories = {
        ("Mercury (planet)", "Jazz"): Reply.ok(GOOD, prompt_tokens=100, completion_tokens=40),
        ("Photosynthesis", "Venus"): Reply.ok(MISSES_VENUS, prompt_tokens=90, completion_tokens=35),
    }
    with story_server(stories) as server:
        results = generate_queries(plans, DOCS, client=client_for(server), limit=2)
        assert len(server.requests) == 2
        prompt = next(r for r in server.requests if "Article 1: Mercury" in r["messages"][0]["content"])
        content = prompt["messages"][0]["content"]
    assert content.startswith(
        "Please create a story about the attached 2 articles on the topics Mercury (planet), Jazz."
    )
    assert "Article 1: Mercury (planet)\nMercury is the smallest planet." in content
    assert "Article 2: Jazz\nJazz originated in New Orleans." in content
    ok, flagged = results
    assert (ok.index, ok.status, ok.text, ok.missing_titles, ok.error) == (0, "ok", GOOD, (), None)
    assert (ok.generator, ok.prompt_tokens, ok.completion_tokens) == ("llm:fake-model", 100, 40)
    assert (flagged.index, flagged.status, flagged.missing_titles) == (1, "flagged", ("Venus",))
    assert flagged.text == MISSES_VENUS and flagged.plan == plans[1]


def test_empty_short_and_http_errors_fail_without_text() -> None:
    plans = [QueryPlan(1, ("m",)), QueryPlan(2, ("j", "v")), QueryPlan(1, ("p",))]
    stories = {
        ("Mercury (planet)",): Reply.ok("   \n "),
        ("Jazz", "Venus"): Reply.ok("Jazz. Venus."),  # 2 words < 5 * 2 aspects
        ("Photosynthesis",): Reply.error(400, "context length exceeded"),
    }
    with story_server(stories) as server:
        results = generate_queries(plans, DOCS, client=client_for(server))
    assert [r.status for r in results] == ["failed"] * 3
    assert all(r.text is None and r.fusion == () for r in results)
    assert results[0].error == "The LLM returned an empty answer instead of a story."
    assert "too short" in (results[1].error or "") and "2 words, at least 10 expected" in (results[1].error or "")
    assert "HTTP 400: context length exceeded" in (results[2].error or "")


def test_resume_skips_done_plans_and_missing_document_fails() -> None:
    plans = [QueryPlan(1, ("m",)), QueryPlan(2, ("m", "j")), QueryPlan(1, ("nope",))]
    stories = {("Mercury (planet)", "Jazz"): GOOD}
    seen: list[tuple[int, int]] = []
    with story_server(stories) as server:
        results = generate_queries(
            plans, DOCS, client=client_for(server), skip={0}, progress=lambda d, t: seen.append((d, t))
        )
        assert len(server.requests) == 1  # plan 0 skipped, plan 2 never sent
    assert [(r.index, r.status) for r in results] == [(1, "ok"), (2, "failed")]
    assert results[1].error == "document(s) nope not found in the collection"
    assert sorted(seen) == [(1, 2), (2, 2)]


def test_cancelled_before_start_sends_nothing() -> None:
    cancel = threading.Event()
    cancel.set()
    with story_server({}) as server:
        results = generate_queries([QueryPlan(1, ("m",))], DOCS, client=client_for(server), cancel=cancel)
        assert (results, server.requests) == ([], [])


def test_concurrency_limit_is_respected() -> None:
    plans = [QueryPlan(2, ("m", "j"))] * 4
    with story_server({("Mercury (planet)", "Jazz"): Reply.ok(GOOD, delay_s=0.2)}) as server:
        results = generate_queries(plans, DOCS, client=client_for(server), limit=2)
        assert server.max_in_flight == 2
    assert [r.index for r in results] == [0, 1, 2, 3] and {r.status for r in results} == {"ok"}


def test_fusion_subqueries_are_parsed_and_tokens_summed() -> None:
    def respond(prompt: str) -> Reply:
        if prompt.startswith(FUSION_PROMPT_START):
            assert "Write exactly 2 short" in prompt and prompt.endswith(GOOD)
            return Reply.ok(
                "1. Mercury orbit length\n2. Louis Armstrong jazz\n3. extra", prompt_tokens=7, completion_tokens=3
            )
        return Reply.ok(GOOD, prompt_tokens=100, completion_tokens=40)

    with FakeOpenAIServer(by_content(respond)) as server:
        result = generate_queries(
            [QueryPlan(2, ("m", "j"))], DOCS, client=client_for(server), want_fusion=True, n_fusion=2
        )[0]
        assert len(server.requests) == 2
    assert result.status == "ok"
    assert result.fusion == ("Mercury orbit length", "Louis Armstrong jazz")
    assert (result.prompt_tokens, result.completion_tokens) == (107, 43)


def test_failed_fusion_flags_the_story() -> None:
    with FakeOpenAIServer(scripted([GOOD, "\n\n"])) as server:
        result = generate_queries([QueryPlan(2, ("m", "j"))], DOCS, client=client_for(server), want_fusion=True)[0]
    assert (result.status, result.text, result.fusion) == ("flagged", GOOD, ())
    assert result.error == "Fusion sub-queries failed: the LLM answer contained no usable lines."


def test_fewer_subqueries_than_asked_and_an_echoed_story_flag_the_query() -> None:
    # SmolLM2-135M answered a request for 3 sub-queries with the story itself, on one line
    with FakeOpenAIServer(scripted([GOOD, GOOD, GOOD, "Mercury orbit\nmercury ORBIT\nJazz in New Orleans"])) as server:
        echoed, short = generate_queries([QueryPlan(2, ("m", "j")), QueryPlan(2, ("m", "j"))], DOCS,
                                         client=client_for(server), want_fusion=True, n_fusion=3, limit=1)
    assert (echoed.status, echoed.fusion) == ("flagged", (GOOD,))
    assert echoed.error == ("Fusion sub-queries: 3 asked for, the LLM gave 1 distinct one(s); "
                            "Fusion sub-queries: the LLM repeated the whole story as a sub-query")
    assert (short.status, short.fusion) == ("flagged", ("Mercury orbit", "Jazz in New Orleans"))
    assert short.error == "Fusion sub-queries: 3 asked for, the LLM gave 2 distinct one(s)"


def test_a_story_caught_in_a_loop_is_flagged() -> None:
    loop = "On Mercury (planet) they played Jazz all night. " + "The band played on and on. " * 3
    with FakeOpenAIServer(scripted([loop])) as server:
        result = generate_queries([QueryPlan(2, ("m", "j"))], DOCS, client=client_for(server))[0]
    assert (result.status, result.missing_titles) == ("flagged", ())
    assert result.error == "The story repeats one sentence 3 times: 'The band played on and on.'"


def test_offline_generation_without_client() -> None:
    plans = [QueryPlan(2, ("m", "j")), QueryPlan(3, ("v", "p", "j"))]
    first = generate_queries(plans, DOCS, client=None, want_fusion=True, n_fusion=2)
    assert first == generate_queries(plans, DOCS, client=None, want_fusion=True, n_fusion=2)
    for result, plan in zip(first, plans):
        assert (result.status, result.generator, result.error) == ("ok", "offline-composer", None)
        assert result.text is not None
        assert missing_titles(result.text, [DOCS[d].title for d in plan.doc_ids]) == []
        assert (result.prompt_tokens, result.completion_tokens) == (0, 0)
    # 3 per-article extracts grouped into 2 sub-queries: [1st + 2nd], [3rd]
    assert len(first[1].fusion) == 2
    assert first[1].fusion[1].startswith("Jazz originated in New Orleans.")
    assert " ".join(first[1].fusion) == first[1].text


def test_regenerate_one_uses_a_fresh_call_with_higher_temperature() -> None:
    with FakeOpenAIServer(scripted([GOOD])) as server:
        result = regenerate_one(QueryPlan(2, ("m", "j")), DOCS, client=client_for(server), index=5)
        assert server.requests[0]["temperature"] == 0.9
    assert (result.index, result.status, result.text) == (5, "ok", GOOD)
    offline = regenerate_one(QueryPlan(1, ("v",)), DOCS, client=None, index=1)
    assert (offline.index, offline.status, offline.generator) == (1, "ok", "offline-composer")
