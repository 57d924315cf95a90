"""The offline zero-shot suggestion for the documents the LLM failed on (issue 36): stored under the zero-shot
identity marked as a fallback, with a reason naming the LLM and why it failed, shown as such in the review queue;
the LLM's own to-do list is unchanged. A real SQLite store and a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json

import numpy as np

import db
from services.llm.client import LLMClient
from services.workflows import annotation as ann
from services.workflows import preannotation_report as pr
from tests.support.openai_server import FakeOpenAIServer, Reply, document_title
from tests.support.topic_corpus import add_topic_corpus, truth

WORDS = {"Sports": ("team", "match", "games", "athletes"), "Public Health": ("vaccine", "clinic", "disease"),
         "Finance": ("bank", "rate", "markets", "money"), "Space": ("rocket", "planets", "probe", "stars")}
LLM_FAILS_ON = {"Clinic bulletin 1", "Launch log 3", "Match report 4"}


def _keyword_embed(texts: list[str]) -> np.ndarray:
    """[count of each category's words] + a small bias: a tiny deterministic embedding."""
    return np.asarray([[sum(t.lower().count(w) for w in words) for words in WORDS.values()] + [0.1] for t in texts])


def _llm(body: dict) -> Reply | str:
    title = document_title(body)
    if title in LLM_FAILS_ON:
        return "I do not know."  # to every prompt: the document fails (parse)
    return json.dumps({"label": truth(title), "confidence": 0.8, "reason": "from the title"})


def test_documents_the_llm_failed_on_get_an_offline_suggestion_marked_as_a_fallback(store: db.Store) -> None:
    corpus_id, ids = add_topic_corpus(store, "Topics", 8)
    titles = {d: db.get_document(store, d).title for d in ids}
    with FakeOpenAIServer(_llm) as server:
        annotator = ann.LLMAnnotator(LLMClient(server.llm_config(concurrency=1)))
        summary = ann.preannotate(store, corpus_id, annotator)
    assert (summary.ok, summary.failed, summary.causes) == (5, 3, {"parse": 3})
    failed = sorted(d for d in ids if titles[d] in LLM_FAILS_ON)
    zero_shot = ann.ZeroShotAnnotator(_keyword_embed, "kw")
    identity = pr.fallback_identity("kw")
    assert identity == ("zero-shot:kw", "kw/zs-v1/T=0.05/fallback")
    assert pr.failed_by(store, corpus_id, annotator.agent, annotator.model_version, fallback=identity) == failed

    done = pr.zero_shot_fallback(store, corpus_id, annotator.agent, annotator.model_version, zero_shot)
    assert (done.todo, done.ok, done.failed) == (3, 3, 0)
    for doc in failed:
        item = ann.review_item(store, doc)  # the review queue's latest suggestion of the document
        s = item.suggestion
        assert (s.status, s.category, s.agent, s.model_version) == ("ok", truth(titles[doc]), *identity)
        assert s.reason.startswith("offline fallback, llm:fake-model failed on this document (parse: no valid "
                                   "category in the answer): closest category by embedding similarity (cos=")
        assert pr.suggestion_source(s.agent, s.model_version) == "offline zero-shot, for a document the LLM failed on"
    for doc in set(ids) - set(failed):  # the LLM's answers stand
        assert [(s.agent, s.status) for s in db.list_suggestions(store, doc)] == [("llm:fake-model", "ok")]
    assert pr.suggestion_source("llm:fake-model", "fake-model/annotate-v1") == "LLM"

    # nothing left to fall back on; the LLM still has the three to do (a later LLM answer becomes the latest)
    assert pr.failed_by(store, corpus_id, annotator.agent, annotator.model_version, fallback=identity) == []
    assert pr.zero_shot_fallback(store, corpus_id, annotator.agent, annotator.model_version, zero_shot).todo == 0
    assert db.documents_without_suggestion(store, corpus_id, annotator.agent, annotator.model_version) == failed
