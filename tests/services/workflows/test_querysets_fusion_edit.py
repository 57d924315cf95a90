"""A hand edit of a story whose Fusion sub-queries request failed (flagged "Fusion sub-queries failed: ...", no
sub-queries) recomputed its flag from the text and ground truth alone: the reason went, the query could become
``ok`` with no sub-queries, and a resume no longer asked for them (Fusion RAG then ran without any for it). Now,
while such a story has no sub-queries and its set was generated with them, an edit keeps that reason (flagged,
resumable) and a resume asks for its sub-queries only; sub-queries given in the edit end the reason. Whether a
resume asks is decided by one function of :mod:`services.querygen.generate`, which alone words the reason; a
hand-written or imported query is never asked for, whatever its reason says. Real OpenAI-compatible server on
127.0.0.1 (tests/support/openai_server.py), real SQLite store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import db
from services.llm.client import LLMClient
from services.querygen.generate import fusion_failure_reason, split_fusion_reason
from services.workflows import querysets as qw
from tests.support.mini_corpus import add_space_music_food
from tests.support.openai_server import FakeOpenAIServer, Reply, is_fusion_request, last_user_message

LINES = "first sub-query about the story\nsecond sub-query about the story"
NOT_MADE = "Fusion sub-queries were not made: the story has none yet (a resume asks for them)"


@pytest.fixture
def corpus(store) -> db.CorpusInfo:
    return add_space_music_food(store)



class Endpoint:
    """Stories name every title of their prompt; the Fusion requests whose 1-based positions among the Fusion
    requests are in ``fail`` answer HTTP 500, those in ``empty`` an empty answer (no usable line), the others
    :data:`LINES`."""

    def __init__(self, fail: set[int] = frozenset(), empty: set[int] = frozenset(),
                 fail_story: set[int] = frozenset()) -> None:
        self.fail, self.empty, self.fail_story = fail, empty, fail_story
        self.fusion_seen = self.stories_seen = 0

    def __call__(self, body: dict) -> Reply | str:
        prompt = last_user_message(body)
        if is_fusion_request(body):
            self.fusion_seen += 1
            if self.fusion_seen in self.fail:
                return Reply.error(500, "model overloaded")
            return "" if self.fusion_seen in self.empty else LINES
        self.stories_seen += 1
        if self.stories_seen in self.fail_story:
            return Reply.error(500, "story lost")
        titles = re.findall(r"^Article \d+: (.+)$", prompt, flags=re.MULTILINE)
        return "Once upon a time " + " and ".join(titles) + " met in a long story with many words and details."


def _generate(store: db.Store, corpus: db.CorpusInfo, server: FakeOpenAIServer,
              requests: int = 4) -> tuple[int, LLMClient]:
    """Two stories (1 and 2 aspects) with 2 sub-queries wanted each; returns the set's id and the client."""
    client = LLMClient(server.llm_config(max_retries=0, concurrency=1), sleep=lambda s: None)
    rep = qw.generate_query_set(store, corpus_id=corpus.id, name="Fused", aspect_counts=[1, 2], per_count=1,
                                seed=3, client=client, want_fusion=True, n_fusion=2)
    assert len(server.requests) == requests  # story, fusion, story, fusion (none after a failed story)
    return rep.query_set_id, client


def _flagged(store: db.Store, set_id: int) -> db.QueryRow:
    (q,) = [q for q in db.list_queries(store, set_id) if q.status == "flagged"]
    return q


def _titles(store: db.Store, q: db.QueryRow) -> list[str]:
    return [d.title for d in db.get_documents(store, q.ground_truth)]


def _todo(store: db.Store, set_id: int) -> qw.GenerationTodo:
    return qw.generation_todo(store, db.get_query_set(store, set_id))


def test_an_edit_keeps_the_failed_fusion_reason_and_a_resume_then_asks_only_for_the_sub_queries(store,
                                                                                                 corpus) -> None:
    with FakeOpenAIServer(Endpoint(fail={2})) as server:
        set_id, client = _generate(store, corpus, server)
        victim = _flagged(store, set_id)
        assert victim.fusion == [] and victim.error.startswith("Fusion sub-queries failed: LLM request to model ")
        assert victim.error.endswith("HTTP 500: model overloaded.") and "; " not in victim.error  # that reason only
        titles = _titles(store, victim)
        assert len(titles) == 2

        text = f"By hand: what links {titles[0]} with {titles[1]}?"
        edited = qw.edit_query(store, victim.id, text=text, ground_truth=victim.ground_truth)
        assert (edited.status, edited.error, edited.fusion, edited.text) == ("flagged", victim.error, [], text)
        assert qw.needs_fusion(edited, True)
        assert _todo(store, set_id) == qw.GenerationTodo(planned=2, usable=2, failed=0, fusion=1)

        sent = len(server.requests)
        rep = qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=set_id, client=client)
        (again,) = server.requests[sent:]  # the sub-queries of the edited text, no story
        assert is_fusion_request(again) and last_user_message(again).endswith("Text:\n" + text)
        assert (rep.fusion_asked, rep.fusion_made, rep.fusion_missing, rep.ok + rep.flagged + rep.failed) == (
            1, 1, 0, 0)
    fixed = db.get_query(store, victim.id)
    assert (fixed.status, fixed.error, fixed.fusion, fixed.text) == ("ok", "", LINES.split("\n"), text)
    assert _todo(store, set_id).missing == 0


def test_other_reasons_are_recomputed_beside_the_kept_one_and_survive_the_resume(store, corpus) -> None:
    with FakeOpenAIServer(Endpoint(fail={2})) as server:
        set_id, client = _generate(store, corpus, server)
        victim = _flagged(store, set_id)
        first, second = _titles(store, victim)

        edited = qw.edit_query(store, victim.id, text=f"Only {first} here.", ground_truth=victim.ground_truth)
        assert (edited.status, edited.error) == ("flagged", f"{victim.error}; missing titles: {second}")
        assert qw.needs_fusion(edited, True)

        sent = len(server.requests)
        qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=set_id, client=client)
        assert len(server.requests) == sent + 1 and is_fusion_request(server.requests[-1])
    repaired = db.get_query(store, victim.id)
    assert (repaired.status, repaired.error, repaired.fusion) == ("flagged", f"missing titles: {second}",
                                                                  LINES.split("\n"))
    # With its sub-queries stored, an edit naming both titles leaves nothing to flag.
    done = qw.edit_query(store, victim.id, text=f"{first} and {second}.", ground_truth=victim.ground_truth)
    assert (done.status, done.error, done.fusion) == ("ok", "", LINES.split("\n"))


def test_sub_queries_given_in_the_edit_end_the_reason(store, corpus) -> None:
    with FakeOpenAIServer(Endpoint(fail={2})) as server:
        set_id, client = _generate(store, corpus, server)
        victim = _flagged(store, set_id)
        first, second = _titles(store, victim)
        edited = qw.edit_query(store, victim.id, text=f"{first} and {second}?", ground_truth=victim.ground_truth,
                               fusion=[" typed one ", "  ", "typed two"])
        assert (edited.status, edited.error, edited.fusion) == ("ok", "", ["typed one", "typed two"])
        assert not qw.needs_fusion(edited, True)
        assert _todo(store, set_id) == qw.GenerationTodo(planned=2, usable=2, failed=0, fusion=0)
        sent = len(server.requests)
        qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=set_id, client=client)
        assert len(server.requests) == sent  # nothing left to ask for


def test_an_edit_that_removes_the_sub_queries_flags_the_story_and_a_resume_asks_for_them(store, corpus) -> None:
    with FakeOpenAIServer(Endpoint()) as server:
        set_id, client = _generate(store, corpus, server)
        q1, q2 = db.list_queries(store, set_id)
        assert (q1.status, q2.status, q1.fusion) == ("ok", "ok", LINES.split("\n"))
        cleared = qw.edit_query(store, q1.id, text=q1.text, ground_truth=q1.ground_truth, fusion=[])
        assert (cleared.status, cleared.error, cleared.fusion) == ("flagged", NOT_MADE, [])
        # A story left without sub-queries and without the reason (as the old edit left them) is asked for too,
        # its other reasons kept.
        db.update_query(store, q2.id, fusion=[], status="flagged", error="missing titles: Nowhere")
        assert qw.needs_fusion(db.get_query(store, q2.id), True)
        assert _todo(store, set_id).fusion == 2

        sent = len(server.requests)
        rep = qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=set_id, client=client)
        assert len(server.requests) == sent + 2 and all(is_fusion_request(b) for b in server.requests[sent:])
        assert (rep.fusion_asked, rep.fusion_made, rep.fusion_missing) == (2, 2, 0)
    after = {q.id: q for q in db.list_queries(store, set_id)}
    assert (after[q1.id].status, after[q1.id].error, after[q1.id].fusion) == ("ok", "", LINES.split("\n"))
    assert (after[q2.id].status, after[q2.id].error, after[q2.id].fusion) == (
        "flagged", "missing titles: Nowhere", LINES.split("\n"))


def test_a_failed_story_written_by_hand_gets_its_sub_queries_from_the_next_resume(store, corpus) -> None:
    with FakeOpenAIServer(Endpoint(fail_story={2})) as server:
        set_id, client = _generate(store, corpus, server, requests=3)
        (failed,) = [q for q in db.list_queries(store, set_id) if q.status == "failed"]
        first, second = _titles(store, failed)
        edited = qw.edit_query(store, failed.id, text=f"{first} meets {second}.", ground_truth=failed.ground_truth)
        assert (edited.status, edited.error, edited.fusion) == ("flagged", NOT_MADE, [])
        assert _todo(store, set_id) == qw.GenerationTodo(planned=2, usable=2, failed=0, fusion=1)
        sent = len(server.requests)
        qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=set_id, client=client)
        (again,) = server.requests[sent:]  # its sub-queries only: the hand-written story is kept
        assert is_fusion_request(again) and last_user_message(again).endswith(f"Text:\n{first} meets {second}.")
    fixed = db.get_query(store, failed.id)
    assert (fixed.status, fixed.error, fixed.fusion, fixed.text) == ("ok", "", LINES.split("\n"),
                                                                     f"{first} meets {second}.")


def test_an_answer_without_usable_lines_stays_flagged_through_an_edit_and_is_not_asked_again(store, corpus) -> None:
    with FakeOpenAIServer(Endpoint(empty={2})) as server:
        set_id, client = _generate(store, corpus, server)
        victim = _flagged(store, set_id)
        assert (victim.error, victim.fusion) == ("Fusion sub-queries failed: the LLM answer contained no usable "
                                                 "lines.", [])
        first, second = _titles(store, victim)
        edited = qw.edit_query(store, victim.id, text=f"{second} or {first}?", ground_truth=victim.ground_truth)
        assert (edited.status, edited.error) == ("flagged", victim.error)
        assert not qw.needs_fusion(edited, True) and _todo(store, set_id).missing == 0
        sent = len(server.requests)
        qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=set_id, client=client)
        assert len(server.requests) == sent


def test_hand_written_and_imported_queries_are_never_flagged_for_fusion(store, corpus, tmp_path: Path) -> None:
    venus = db.list_documents(store, corpus.id, search="venus").items[0]
    hand = qw.add_manual_query_to_new_set(store, corpus.id, "Hand", text="Venus by hand", ground_truth=[venus.id])
    info = db.get_query_set(store, hand.query_set_id)
    assert not qw.wants_fusion(info)
    edited = qw.edit_query(store, hand.id, text="Venus, hand-edited", ground_truth=[venus.id], fusion=[])
    assert (edited.status, edited.error, edited.fusion) == ("ok", "", [])
    assert not qw.needs_fusion(edited, True)  # even when told its set wants them: no request was made for it

    # An imported query whose reason (from the file) reads like a failed request, without sub-queries.
    path = tmp_path / "q.json"
    path.write_text(json.dumps([{"topics": ["Venus"], "text": "Venus from a file", "fusion": [], "status": "flagged",
                                 "reason": "Fusion sub-queries failed: HTTP 500: boom"}]), encoding="utf-8")
    rep = qw.import_benchmark_queries(store, corpus.id, path, name="Imported")
    (imported,) = db.list_queries(store, rep.query_set_id)
    assert (imported.status, imported.error) == ("flagged", "Fusion sub-queries failed: HTTP 500: boom")
    assert not qw.needs_fusion(imported, True)
    assert _todo(store, rep.query_set_id) == qw.GenerationTodo(0, 0, 0, 0)
    again = qw.edit_query(store, imported.id, text="Venus, hand-edited", ground_truth=[venus.id])
    assert (again.status, again.error) == ("ok", "")

    # A hand-written query added to a set generated with sub-queries: no request was made for it either.
    with FakeOpenAIServer(Endpoint()) as server:
        set_id, client = _generate(store, corpus, server)
        added = qw.add_manual_query(store, set_id, text="Venus, added by hand", ground_truth=[venus.id])
        edited = qw.edit_query(store, added.id, text="Venus, edited by hand", ground_truth=[venus.id])
        assert (edited.status, edited.error, edited.fusion) == ("ok", "", [])
        assert not qw.needs_fusion(edited, True) and _todo(store, set_id).fusion == 0
        sent = len(server.requests)
        qw.generate_query_set(store, corpus_id=corpus.id, query_set_id=set_id, client=client)
        assert len(server.requests) == sent


@pytest.mark.parametrize(("error", "found"), [
    ("Fusion sub-queries failed: HTTP 500: boom", ("Fusion sub-queries failed: HTTP 500: boom", "")),
    ("The story was cut off; Fusion sub-queries were not made: stopped; missing titles: Venus",
     ("Fusion sub-queries were not made: stopped", "The story was cut off; missing titles: Venus")),
    ("missing titles: Venus; Fusion sub-queries failed: the LLM answer contained no usable lines.",
     ("Fusion sub-queries failed: the LLM answer contained no usable lines.", "missing titles: Venus")),
    # Reasons that mention the sub-queries without saying that they are missing:
    ("check the Fusion sub-queries failed: they look vague", None),
    ("Fusion sub-queries: 3 asked for, the LLM gave 1 distinct one(s)", None),
    ("The story repeats one sentence 3 times: 'Fusion sub-queries failed: x'", None),
    ("missing titles: Fusion sub-queries were not made: a novel", None),
    ("", None),
])
def test_which_reason_says_the_sub_queries_are_missing(error: str, found: tuple[str, str] | None) -> None:
    assert split_fusion_reason(error) == found


def test_the_reason_stays_one_reason_whatever_the_endpoint_said() -> None:
    reason = fusion_failure_reason("HTTP 500: {'error': 'a; b'}")
    assert reason == "Fusion sub-queries failed: HTTP 500: {'error': 'a, b'}"
    assert fusion_failure_reason("LLM request stopped", sent=False) == ("Fusion sub-queries were not made: "
                                                                        "LLM request stopped")
    assert fusion_failure_reason("") == "Fusion sub-queries failed: unknown error"
    assert split_fusion_reason(f"{reason}; missing titles: Venus") == (reason, "missing titles: Venus")
