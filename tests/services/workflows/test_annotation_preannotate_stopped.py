"""A pre-annotation stopped mid-batch keeps what the progress bar counted: when the progress callback raises (the
Annotate and Review page's Cancel, or a rerun: Streamlit raises inside it) or a Ctrl+C interrupts the LLM
annotator, the suggestions the current batch already received are stored (one transaction) before the exception
propagates. They were dropped: the bar said 5 documents annotated while only the 3 of the finished batch were kept
(the answers sat in the LLM cache, so a resume cost nothing, but the counts did not match). The requests still in
flight are not waited for: their answers are discarded (issue 36: a Cancel waited 17 s for them)."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

import db
from services.llm.client import LLMClient
from services.workflows import annotation as ann
from services.workflows.llm_cache import StoreLLMCache
from tests.support.openai_server import FakeOpenAIServer, Reply, by_document, document_title

TEXTS = ["goal in the match", "pasta with sauce", "the team won", "bake in the oven", "UNSURE what this is",
         "another goal", "cooking pasta"]
#: what the fake model answers for each text: the category, or None for an answer that is no JSON (a failed one,
#: the same to each of the three prompts the annotator tries)
LABELS = ["sport", "cooking", "sport", "cooking", None, "sport", "cooking"]


class PageStopped(BaseException):
    """What Streamlit raises inside a widget call when the user presses Cancel (its StopException is a
    BaseException too, so ``except Exception`` does not catch it)."""


def _corpus(store: db.Store, n: int = len(TEXTS)) -> tuple[db.CorpusInfo, list[int]]:
    corpus = db.create_corpus(store, "Stops")
    db.add_categories(store, corpus.id, [{"name": "sport", "description": "team match goal"},
                                         {"name": "cooking", "description": "pasta sauce oven"}])
    ids = db.add_documents(store, corpus.id, [{"title": f"d{i}", "text": t} for i, t in enumerate(TEXTS[:n])])
    return corpus, ids.document_ids


def _title(user: str) -> str:
    return user.split("Document title: ")[1].split("\n")[0]


def _answer(user: str, delays: dict[str, float] | None = None) -> Reply:
    i = int(_title(user)[1:])
    delay = (delays or {}).get(f"d{i}", 0.0)
    if LABELS[i] is None:
        return Reply.ok("I cannot tell.", delay_s=delay)
    return Reply.ok(json.dumps({"label": LABELS[i], "confidence": 0.8, "reason": "keywords"}), delay_s=delay)


def _stored(store: db.Store, ids: list[int]) -> dict[int, list[tuple[str, str | None]]]:
    """``{document id: [(status, category), ...]}`` of every document with a suggestion row."""
    out = {}
    for doc in ids:
        rows = db.list_suggestions(store, doc)
        if rows:
            out[doc] = [(r.status, r.category) for r in rows]
    return out


def _sent(server: FakeOpenAIServer) -> Counter[str]:
    """How many requests the server got per document title (re-asks included)."""
    return Counter(document_title(body) for body in server.requests)


def test_a_stop_raised_in_progress_mid_batch_stores_the_documents_the_bar_counted(store: db.Store) -> None:
    corpus, ids = _corpus(store)
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if done == 5:  # the second batch (d3, d4, d5) has d3 and d4 answered: the user presses Cancel
            raise PageStopped

    with FakeOpenAIServer(by_document(_answer)) as server:
        client = LLMClient(server.llm_config(concurrency=1, max_retries=0), sleep=lambda s: None)
        annotator = ann.LLMAnnotator(client, cache=StoreLLMCache(store))
        with pytest.raises(PageStopped):
            ann.preannotate(store, corpus.id, annotator, batch_size=3, progress=progress)
        assert seen == [(0, 7), (1, 7), (2, 7), (3, 7), (3, 7), (4, 7), (5, 7)]  # the bar said 5 of 7
        # the finished batch d0-d2 and the stopped batch's d3 and d4 (its failed answer too, with its error);
        # d5 and d6 have no row, not even a half-written one
        assert _stored(store, ids) == {ids[0]: [("ok", "sport")], ids[1]: [("ok", "cooking")],
                                       ids[2]: [("ok", "sport")], ids[3]: [("ok", "cooking")],
                                       ids[4]: [("failed", None)]}
        assert "I cannot tell." in db.list_suggestions(store, ids[4])[0].error
        agent, version = annotator.agent, annotator.model_version
        assert db.documents_without_suggestion(store, corpus.id, agent, version) == [ids[4], ids[5], ids[6]]
        first = _sent(server)
        # d4 three times: its first prompt and two re-asks with another prompt and temperature
        assert {f"d{i}": first[f"d{i}"] for i in range(5)} == {"d0": 1, "d1": 1, "d2": 1, "d3": 1, "d4": 3}

        resumed = ann.preannotate(store, corpus.id, annotator, batch_size=3)
        assert (resumed.todo, resumed.ok, resumed.failed, resumed.cancelled) == (3, 2, 1, False)
        sent = _sent(server)
    # no document has two rows but d4, whose failed answer is asked again (a failed suggestion is kept as history)
    assert _stored(store, ids) == {ids[0]: [("ok", "sport")], ids[1]: [("ok", "cooking")],
                                   ids[2]: [("ok", "sport")], ids[3]: [("ok", "cooking")],
                                   ids[4]: [("failed", None), ("failed", None)], ids[5]: [("ok", "sport")],
                                   ids[6]: [("ok", "cooking")]}
    # the answered documents were not asked again; d5 (perhaps sent before the stop, then cached) once in all
    assert sent == Counter({"d0": 1, "d1": 1, "d2": 1, "d3": 1, "d4": 6, "d5": 1, "d6": 1})


@pytest.mark.every_backend
def test_a_ctrl_c_with_requests_in_flight_stores_the_answers_counted_and_discards_the_others(store: db.Store
                                                                                            ) -> None:
    """Four requests at once answer in the order d1, d2, d0, d3 (the server waits 0, 0.2, 2, 3 s); a Ctrl+C
    after two answers keeps exactly d1 and d2 and returns at once. d0 and d3 were in flight: they are not waited for,
    their requests are abandoned and nothing of them is stored or cached (the bar never counted them); the resume
    asks for them again."""
    corpus, ids = _corpus(store, 4)
    delays = {"d1": 0.0, "d2": 0.2, "d0": 2.0, "d3": 3.0}
    pressed: list[float] = []

    def progress(done: int, total: int) -> None:
        if done == 2:
            # all four asked first: on a loaded machine the last request's body could still be on its way, and the
            # abort then cut it (the server counted an empty request, not d3)
            deadline = time.monotonic() + 10
            while len(server.requests) < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
            pressed.append(time.monotonic())
            raise KeyboardInterrupt

    with FakeOpenAIServer(by_document(lambda user: _answer(user, delays))) as server:
        client = LLMClient(server.llm_config(concurrency=4, max_retries=0, timeout_s=5.0), sleep=lambda s: None)
        annotator = ann.LLMAnnotator(client, cache=StoreLLMCache(store))
        with pytest.raises(KeyboardInterrupt):
            ann.preannotate(store, corpus.id, annotator, batch_size=4, progress=progress)
        # not d0's or d3's answer, 2 and 3 s after they arrived (returning takes ~0.1 s; the margin is for a loaded
        # machine's store)
        assert time.monotonic() - pressed[0] < 1.5
        assert _stored(store, ids) == {ids[1]: [("ok", "cooking")], ids[2]: [("ok", "sport")]}
        assert _sent(server) == Counter({"d0": 1, "d1": 1, "d2": 1, "d3": 1})
        assert db.llm_cache_stats(store).n_entries == 2  # d1 and d2: the abandoned answers are nowhere
        resumed = ann.preannotate(store, corpus.id, annotator, batch_size=4)
        assert (resumed.todo, resumed.ok, resumed.failed) == (2, 2, 0)
        assert _sent(server) == Counter({"d0": 2, "d1": 1, "d2": 1, "d3": 2})
    assert _stored(store, ids) == {ids[0]: [("ok", "sport")], ids[1]: [("ok", "cooking")],
                                   ids[2]: [("ok", "sport")], ids[3]: [("ok", "cooking")]}


def test_on_summary_counts_what_is_stored_after_each_store_the_stopped_batch_included(store: db.Store) -> None:
    """The counts a stopped run reports (the page's stop message, the command's summary) come from
    ``on_summary``: 0 at the start, 3 ok after the first batch, then d3 ok and d4 failed of the stopped one."""
    corpus, ids = _corpus(store)
    summaries: list[ann.PreannotateSummary] = []

    def progress(done: int, total: int) -> None:
        if done == 5:
            raise PageStopped

    with FakeOpenAIServer(by_document(_answer)) as server:
        client = LLMClient(server.llm_config(concurrency=1, max_retries=0), sleep=lambda s: None)
        with pytest.raises(PageStopped):
            ann.preannotate(store, corpus.id, ann.LLMAnnotator(client), batch_size=3, progress=progress,
                            on_summary=summaries.append)
    assert [(s.todo, s.ok, s.failed, s.cancelled, s.remaining) for s in summaries] == [
        (7, 0, 0, False, 7), (7, 3, 0, False, 4), (7, 4, 1, True, 3)]
    (error,) = summaries[-1].errors
    assert error.startswith(f"document 'd4' (id {ids[4]}): parse: no usable answer in 3 tries (the first prompt: "
                            "answer contains no JSON object: 'I cannot tell.'; corrected at temperature 0.5: ")
    assert summaries[-1].causes == {"parse": 1}
    stored = sum(len(db.list_suggestions(store, d)) for d in ids)
    assert stored == summaries[-1].stored == 5
