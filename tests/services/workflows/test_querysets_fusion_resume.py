"""A story whose Fusion sub-queries request failed (the endpoint answered HTTP 500) was kept flagged without
sub-queries, and a resume never asked for them again: it asked only for failed stories. Now a resume sends only
the Fusion request for such a story (no second story request), stores the sub-queries on the same row and drops
that flag reason (others, such as missing titles, stay); the sets' "left" counts include such stories. Real
OpenAI-compatible server on 127.0.0.1 (tests/support/openai_server.py)."""

from __future__ import annotations

import re

import pytest

import db
from services.llm.client import LLMClient
from services.workflows import querysets as qw
from tests.support.mini_corpus import add_space_music_food
from tests.support.openai_server import FakeOpenAIServer, Reply, is_fusion_request, last_user_message

LINES = "first sub-query about the story\nsecond sub-query about the story"


@pytest.fixture
def corpus(store) -> db.CorpusInfo:
    return add_space_music_food(store)


def _titles(prompt: str) -> list[str]:
    return re.findall(r"^Article \d+: (.+)$", prompt, flags=re.MULTILINE)



class Endpoint:
    """Stories name every title, except that the first story leaves out its first title when ``drop_first``;
    the Fusion requests whose 1-based positions among the Fusion requests are in ``fail_fusion`` answer HTTP 500."""

    def __init__(self, fail_fusion: set[int], drop_first: bool = False) -> None:
        self.fail_fusion, self.drop_first = fail_fusion, drop_first
        self.fusion_seen = self.stories_seen = 0

    def __call__(self, body: dict) -> Reply | str:
        if is_fusion_request(body):
            self.fusion_seen += 1
            return Reply.error(500, "model overloaded") if self.fusion_seen in self.fail_fusion else LINES
        self.stories_seen += 1
        titles = _titles(last_user_message(body))
        named = (titles[1:] if self.drop_first and self.stories_seen == 1 else titles) or ["a traveller"]
        return "Once upon a time " + " and ".join(named) + " met in a long story with many words and details."


def _client(server: FakeOpenAIServer) -> LLMClient:
    return LLMClient(server.llm_config(max_retries=0, concurrency=1), sleep=lambda s: None)


def test_a_resume_asks_only_for_the_failed_fusion_sub_queries_and_keeps_the_story(store, corpus) -> None:
    endpoint = Endpoint(fail_fusion={2})  # the second (last) plan's sub-queries request fails
    with FakeOpenAIServer(endpoint) as server:
        client = _client(server)
        rep = qw.generate_query_set(store, corpus_id=corpus.id, name="Fused", aspect_counts=[1, 2], per_count=1,
                                    seed=3, client=client, want_fusion=True, n_fusion=2)
        assert len(server.requests) == 4 and not rep.cancelled  # story, fusion, story, fusion (500)
        assert (rep.ok, rep.flagged, rep.failed, rep.fusion_missing, rep.remaining) == (1, 1, 0, 1, 1)
        before = {q.id: q for q in db.list_queries(store, rep.query_set_id)}
        (victim,) = [q for q in before.values() if q.status == "flagged"]
        assert victim.fusion == [] and victim.error.startswith("Fusion sub-queries failed: ")
        assert "500" in victim.error and "model overloaded" in victim.error
        info = db.get_query_set(store, rep.query_set_id)
        assert qw.generation_todo(store, info) == qw.GenerationTodo(planned=2, usable=2, failed=0, fusion=1)
        assert qw.generation_missing(store, info) == 1  # it was 0: the set counted as complete

        sent = len(server.requests)
        rep2 = qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=rep.query_set_id, client=client)
        assert len(server.requests) == sent + 1  # the sub-queries request only, no second story
        (again,) = server.requests[sent:]
        assert is_fusion_request(again) and last_user_message(again).endswith("Text:\n" + victim.text)
        assert (rep2.ok, rep2.flagged, rep2.failed, rep2.cancelled) == (0, 0, 0, False)
        assert (rep2.fusion_asked, rep2.fusion_made, rep2.fusion_missing, rep2.remaining) == (1, 1, 0, 0)

        after = {q.id: q for q in db.list_queries(store, rep.query_set_id)}
        assert set(after) == set(before)  # the same rows
        fixed = after[victim.id]
        assert (fixed.status, fixed.error, fixed.fusion) == ("ok", "", LINES.split("\n"))
        assert fixed.text == victim.text  # the story paid for is kept
        assert qw.generation_missing(store, db.get_query_set(store, rep.query_set_id)) == 0
        other = next(i for i in after if i != victim.id)
        assert after[other] == before[other]

        # Nothing is left: a third run sends nothing.
        qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=rep.query_set_id, client=client)
        assert len(server.requests) == sent + 1


def test_a_stopped_run_counts_the_missing_sub_queries_as_left_and_keeps_other_flag_reasons(store, corpus) -> None:
    """The first plan's Fusion request answers 500: the breaker stops the run (3 plans not sent). Left: 3 queries
    and 1 story's sub-queries; the resume asks for those sub-queries first, then writes the 3 others. The story
    that left out its title stays flagged for that, without the Fusion reason."""
    endpoint = Endpoint(fail_fusion={1}, drop_first=True)
    with FakeOpenAIServer(endpoint) as server:
        client = _client(server)
        rep = qw.generate_query_set(store, corpus_id=corpus.id, name="Stopped", aspect_counts=[1, 2],
                                    per_count=2, seed=3, client=client, want_fusion=True, n_fusion=2, batch_size=1)
        assert rep.cancelled and len(server.requests) == 2
        assert (rep.flagged, rep.plans_left, rep.fusion_missing, rep.remaining) == (1, 3, 1, 4)
        assert rep.left_text() == ("3 queries to generate and the Fusion sub-queries of 1 query to ask for again "
                                   "(its story is kept)")
        (first,) = db.list_queries(store, rep.query_set_id)
        info = db.get_query_set(store, rep.query_set_id)
        assert qw.generation_todo(store, info).resume_text() == ("1 without its Fusion sub-queries, asked for again "
                                                                "with its story kept")
        assert qw.generation_missing(store, info) == 4
        left_out = _titles(last_user_message(server.requests[0]))[0]
        assert first.status == "flagged" and first.fusion == []
        assert first.error.startswith("Fusion sub-queries failed: ")
        assert first.error.endswith(f"; missing titles: {left_out}")

        sent = len(server.requests)
        rep2 = qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=rep.query_set_id, client=client)
        new = server.requests[sent:]
        assert len(new) == 1 + 3 * 2 and is_fusion_request(new[0])  # the sub-queries first, then 3 stories + fusion
        assert sum(bool(_titles(last_user_message(b))) for b in new) == 3
        assert (rep2.fusion_asked, rep2.fusion_made, rep2.remaining, rep2.cancelled) == (1, 1, 0, False)
    fixed = next(q for q in db.list_queries(store, rep.query_set_id) if q.id == first.id)
    assert fixed.text == first.text and fixed.fusion == LINES.split("\n")
    assert (fixed.status, fixed.error) == ("flagged", f"missing titles: {left_out}")
    assert qw.generation_missing(store, db.get_query_set(store, rep.query_set_id)) == 0


@pytest.mark.parametrize(("error", "kept"), [
    ("Fusion sub-queries failed: HTTP 500: boom", ""),
    ("The story was cut off at the endpoint's token limit (finish_reason 'length'); Fusion sub-queries failed: "
     "HTTP 500: boom; missing titles: Venus, Jazz",
     "The story was cut off at the endpoint's token limit (finish_reason 'length'); missing titles: Venus, Jazz"),
    ("Fusion sub-queries were not made: LLM request stopped; missing titles: Venus", "missing titles: Venus"),
    ("Fusion sub-queries failed: the LLM answer contained no usable lines.", None),  # a model's answer, not asked
    ("missing titles: Venus", None),
])
def test_which_flag_reason_a_resume_repairs(error: str, kept: str | None) -> None:
    assert qw._without_fusion_failure(error) == kept


def test_export_file_names_keep_no_path_characters() -> None:
    assert qw.export_file_name("runs/2024: v1") == "runs_2024_v1.json"
    assert qw.export_file_name("../../etc/passwd") == ".._.._etc_passwd.json"
    assert qw.export_file_name("C:\\sets\\best") == "C_sets_best.json"
    assert qw.export_file_name("Wiki set-2.b") == "Wiki_set-2.b.json"
    assert qw.export_file_name("/// ") == "query_set.json"
