"""LLM pre-annotation against a real local server that answers like a small model (issue 36: SmolLM2-135M behind a
small OpenAI-compatible server gave 6 suggestions for 41 documents): slow, one request at a time, and often off the
category list; and against servers that honour or refuse JSON-schema output. Each test states what the old code did.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import pytest

import db
from services.annotate import annotate_documents
from services.annotate.llm_annotator import Activity
from services.llm.client import LLMClient
from services.workflows import annotation as aw
from services.workflows import preannotation_report as pr
from tests.support.openai_server import FakeOpenAIServer, Reply, document_title
from tests.support.small_model import SmallModel, draw, tokens
from tests.support.topic_corpus import CATEGORIES, add_topic_corpus, topic_docs, truth


def _serve(model: SmallModel) -> FakeOpenAIServer:
    return FakeOpenAIServer(model, slots=1).start()


def test_most_documents_get_a_category_from_a_slow_off_list_model() -> None:
    """60% of the first answers are off the list; a correction and a name-only question fix most of those. The old
    code stored the first answers only (it asked once, at temperature 0): 40% or so."""
    model = SmallModel(truth, delay_s=0.01)
    docs = topic_docs(36)
    server = _serve(model)
    try:
        result = annotate_documents(LLMClient(server.llm_config(timeout_s=5, concurrency=4)), docs, CATEGORIES)
    finally:
        server.stop()
    ok = {s.document_key: s.label for s in result if s.ok}
    expected = {d.key: truth(d.title) for d in docs if model.fixable(d.title)}
    assert ok == expected  # each one with its right category
    right_first = sum(draw(d.title, "first") >= model.off_list for d in docs)  # one request per document
    assert len(ok) >= 0.8 * len(docs) > right_first
    failed = [s for s in result if not s.ok]
    assert all(s.error.startswith("parse: no usable answer in 3 tries (the first prompt: ") for s in failed)
    off = len(docs) - right_first
    assert (model.asked["first"], model.asked["correction"]) == (36, off)  # a correction for each off-list one


def test_a_server_that_honours_the_schema_answers_every_document_in_one_request_scored_by_logprobs() -> None:
    """Output constrained to the categories: no answer is off the list, one request per document; the score is
    the probability of the label's tokens (each -0.1 here): exp(-0.1) for 'Sports', exp(-0.3) for 'Public Health'
    ('Public', ' ', 'Health'). The old code asked for json_object only, and this model answers off the list."""
    model = SmallModel(truth, off_list=1.0, fixed_by_correction=0.0, fixed_by_name=0.0, schema="honour",
                       logprobs=True)
    server = _serve(model)
    try:
        result = annotate_documents(LLMClient(server.llm_config(timeout_s=5)), topic_docs(8), CATEGORIES)
        requests = list(server.requests)
    finally:
        server.stop()
    assert [(s.label, s.status) for s in result] == [(truth(d.title), "ok") for d in topic_docs(8)]
    assert len(requests) == 8
    assert requests[0]["response_format"]["json_schema"]["schema"]["properties"]["label"]["enum"] == [
        "Sports", "Public Health", "Finance", "Space"]
    scores = {s.label: s.score for s in result}
    assert scores["Sports"] == pytest.approx(math.exp(-0.1))
    assert scores["Public Health"] == pytest.approx(math.exp(-0.3)) and len(tokens("Public Health")) == 3
    assert all("probability of the label's tokens" in s.reason for s in result)


def test_a_server_that_refuses_the_schema_is_asked_without_it_and_the_run_says_so() -> None:
    """HTTP 400 for ``response_format: json_schema``: one refusal, then plain JSON mode for the rest of the run,
    named in the run's notes."""
    model = SmallModel(truth, off_list=0.0, schema="refuse")
    server = _serve(model)
    try:
        annotator = aw.LLMAnnotator(LLMClient(server.llm_config(timeout_s=5, concurrency=1)))
        result = annotator.annotate(topic_docs(6), CATEGORIES, cancel=None)
        formats = [b.get("response_format", {}).get("type") for b in server.requests]
    finally:
        server.stop()
    assert all(s.ok for s in result) and len(result) == 6
    assert formats == ["json_schema"] + ["json_object"] * 6
    assert annotator.notes() == [
        "The endpoint refused JSON-schema output (HTTP 400: response_format type 'json_schema' is not supported by "
        "this server): answers were asked for as plain JSON, and their labels checked against the categories here."]


def test_timeouts_lower_the_concurrency_and_every_document_is_answered() -> None:
    """One slot, 0.25 s per answer, a 0.6 s timeout and 4 requests at once: the third and fourth wait too long.
    The concurrency halves, the timed-out documents are sent again, all 12 are answered. The old code took the
    first timeout as the endpoint failing for good and stopped the run."""
    model = SmallModel(truth, delay_s=0.25, off_list=0.0)
    server = _serve(model)
    seen: list[Activity] = []
    try:
        annotator = aw.LLMAnnotator(LLMClient(server.llm_config(timeout_s=0.6, concurrency=4, max_retries=0)))
        result = annotator.annotate(topic_docs(12), CATEGORIES, cancel=None, activity=seen.append)
    finally:
        server.stop()
    assert [s.status for s in result] == ["ok"] * 12
    assert annotator.stopped_by() is None
    assert min(a.limit for a in seen) <= 2 and max(a.in_flight for a in seen) <= 4
    assert any(a.limit < a.maximum and "lowered from 4 after" in a.describe() for a in seen)
    (note,) = annotator.notes()
    assert note.startswith("Requests in flight lowered from 4 to ")


def _corpus(tmp_path: Path, n: int) -> tuple[db.Store, int, list[int]]:
    store = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    corpus_id, ids = add_topic_corpus(store, "Topics", n)
    return store, corpus_id, ids


def test_a_run_stopped_by_timeouts_names_the_timeout_not_the_parse_failures_before_it(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    """Six documents get answers off the list (stored failed, cause parse); then the server stops keeping up. The
    next document times out three times, the last with one request in flight: the run stops, and its cause is the
    timeout, the error the stopped document stores, with the advice to raise MRAG_LLM_TIMEOUT. The old page named
    the last of the first five failures ("answer names no valid category ... fix the endpoint"), while the
    failures stored said "no answer within 60 s"."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    store, corpus_id, ids = _corpus(tmp_path, 10)
    model = SmallModel(truth, delay_s=0.01, off_list=1.0, fixed_by_correction=0.0, fixed_by_name=0.0, hang_s=5.0)

    def respond(body: dict) -> Reply:
        if document_title(body) == "Market letter 6":
            model.hang.set()
        return model(body)

    server = FakeOpenAIServer(respond, slots=1).start()
    try:
        config = server.llm_config(timeout_s=0.3, concurrency=1, max_retries=4)
        summary = aw.preannotate(store, corpus_id, aw.LLMAnnotator(LLMClient(config)), batch_size=4)
        sixth = [b for b in server.requests if document_title(b) == "Market letter 6"]
    finally:
        server.stop()
    assert (summary.ok, summary.failed, summary.cancelled) == (0, 7, True)
    assert summary.causes == {"parse": 6, "timeout": 1}
    assert summary.errors[-1].split(": ", 1)[1].startswith("parse: ")  # what the old page showed
    assert summary.stop_cause == "timeout"
    (stored,) = db.list_suggestions(store, ids[6])
    assert stored.error == summary.stop_error and stored.error.startswith("timeout: LLM request to model ")
    assert stored.error.endswith("failed: no answer within 0.3 s (MRAG_LLM_TIMEOUT), 3 times (the last try with "
                                 "one request in flight).")
    assert len(sixth) == 3  # the count the message gives is the real one
    text = pr.stop_text(summary, config)
    assert text.startswith("no answer in time (timeout): LLM request to model 'fake-model' at ")
    assert text.endswith("What to do: raise MRAG_LLM_TIMEOUT (now 0.3 s), or lower MRAG_LLM_CONCURRENCY (now 1): a "
                         "small local server answers one request at a time, so the others wait in its queue.")
    assert "no valid category" not in text
    assert all(db.list_suggestions(store, d) == [] for d in ids[7:])  # not sent: resumed later
    store.close()


def test_a_resume_asks_the_failed_documents_again_with_other_answers(tmp_path: Path, monkeypatch) -> None:
    """The re-asks sample (temperature above 0): a resume gets new answers for the documents that failed. The old
    code asked again at temperature 0 and got the same invalid answers (35 failures stayed 35)."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    store, corpus_id, ids = _corpus(tmp_path, 40)
    model = SmallModel(truth, off_list=0.8, fixed_by_correction=0.3, fixed_by_name=0.3)
    server = _serve(model)
    try:
        client = LLMClient(server.llm_config(timeout_s=5))
        first = aw.preannotate(store, corpus_id, aw.LLMAnnotator(client))
        failed = [d.title for d in topic_docs(40) if not model.fixable(d.title)]
        second = aw.preannotate(store, corpus_id, aw.LLMAnnotator(client))
    finally:
        server.stop()
    assert first.failed == len(failed) and first.ok == 40 - len(failed)
    fixed_now = sum(model.fixable(title, asked_before=1) for title in failed)
    assert (second.todo, second.ok, second.failed) == (len(failed), fixed_now, len(failed) - fixed_now)
    assert fixed_now > 0
    store.close()


def test_a_refusal_is_its_own_cause_and_not_asked_again() -> None:
    def respond(body: dict) -> Reply | str:
        if document_title(body) == "Match report 0":
            return Reply.refused("I can't help with that.")
        return '{"label": "Finance", "confidence": 0.7, "reason": "money"}'

    server = FakeOpenAIServer(respond).start()
    try:
        result = annotate_documents(LLMClient(server.llm_config()), topic_docs(2), CATEGORIES, limit=1)
        assert len(server.requests) == 2
    finally:
        server.stop()
    assert [(s.status, s.error) for s in result] == [
        ("failed", "refusal: the model refused to answer: \"I can't help with that.\""), ("ok", "")]


def test_a_cancel_returns_within_a_second_and_abandons_the_requests_in_flight() -> None:
    """Four requests in flight, each answered in 10 s: the cancel comes 0.5 s in. The old code waited for the
    requests in flight (17 s in the issue)."""
    model = SmallModel(truth, delay_s=10.0, off_list=0.0)
    server = FakeOpenAIServer(model, slots=4).start()  # four answered at once; it notices clients that go
    cancel = threading.Event()
    try:
        timer = threading.Timer(0.5, cancel.set)
        timer.start()
        started = time.monotonic()
        result = annotate_documents(LLMClient(server.llm_config(timeout_s=30, concurrency=4)), topic_docs(8),
                                    CATEGORIES, cancel=cancel)
        took = time.monotonic() - started
        sent = len(server.requests)
        deadline = time.monotonic() + 2
        while server.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        in_flight = server.in_flight
    finally:
        server.stop()
    assert result == [] and sent == 4
    assert took - 0.5 < 1.0, f"the cancel took {took - 0.5:.2f} s"
    assert in_flight == 0 and server.abandoned == 4  # the server saw the four requests go
