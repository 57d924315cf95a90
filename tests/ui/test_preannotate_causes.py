"""Annotate & Review against a small, slow local model (issue 36): the stop message names the real cause (the
timeout, as the stored failures do) with its advice, not the last of the first failures ("answer names no valid
category ... fix the endpoint"); the endpoint is described with the retries it really gets; the documents the LLM
failed on are offered the offline zero-shot suggestion, which the review queue shows as such."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.openai_server import FakeOpenAIServer, Reply, document_title
from tests.support.small_model import SmallModel
from tests.support.topic_corpus import add_topic_corpus, truth
from ui.render import md_plain

REVIEW_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "2_Annotate_and_Review.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_a_run_stopped_by_timeouts_says_so_and_the_failed_documents_get_an_offline_suggestion(monkeypatch) -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus_id, ids = add_topic_corpus(store, "Topics", 10)
    # documents 0-5: answers off the list to every prompt (parse failures); from document 6 on the server hangs
    model = SmallModel(truth, delay_s=0.01, off_list=1.0, fixed_by_correction=0.0, fixed_by_name=0.0, hang_s=5.0)

    def respond(body: dict) -> Reply:
        if document_title(body) == "Market letter 6":
            model.hang.set()
        return model(body)

    server = FakeOpenAIServer(respond, slots=1).start()
    try:
        server.set_env(monkeypatch)
        monkeypatch.setenv("MRAG_LLM_TIMEOUT", "0.3")
        monkeypatch.setenv("MRAG_LLM_CONCURRENCY", "1")
        monkeypatch.setenv("MRAG_LLM_MAX_RETRIES", "4")
        at = AppTest.from_file(REVIEW_PAGE, default_timeout=120)
        at.session_state["corpus_id"] = corpus_id
        at.run()
        at.radio(key="ar_view").set_value("Pre-annotate").run()
        assert at.radio(key="pa_annotator").options[0].endswith(md_plain("up to 4 retries, 1 after a timeout)"))
        at.button(key="pa_start").click().run()
        assert not at.exception, [e.value for e in at.exception]
    finally:
        server.stop()
    stop = [w.value for w in at.warning if w.value.startswith("Pre-annotation stopped: ")]
    assert len(stop) == 1, [w.value for w in at.warning]
    (stored,) = db.list_suggestions(store, ids[6])
    assert stored.error.startswith("timeout: ")
    cause = stored.error.removeprefix("timeout: ")
    assert stop[0] == "Pre-annotation stopped: " + md_plain(
        f"no answer in time (timeout): {cause.rstrip('.')}. What to do: raise MRAG_LLM_TIMEOUT (now 0.3 s), or "
        "lower MRAG_LLM_CONCURRENCY (now 1): a small local server answers one request at a time, so the others "
        "wait in its queue.") + " 0 suggestions stored, 10 documents left: press Resume when that is done."
    assert "no valid category" not in stop[0]
    failed = [c.value for c in at.caption if c.value.startswith("Failed: ")]
    assert len(failed) == 5 and all(md_plain("parse: no usable answer in 3 tries") in c for c in failed)

    # the six documents whose answers named no category are offered the offline suggestion (the timed-out one too)
    (offer,) = [i.value for i in at.info if i.value.startswith("The LLM failed on ")]
    assert offer.startswith("The LLM failed on 7 documents: suggest a category for them offline")
    at.button(key="pa_fallback").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.success[0].value.startswith("Offline suggestions for the 7 documents the LLM failed on: 7 suggestions "
                                          "stored, 0 failed.")
    assert not [i for i in at.info if i.value.startswith("The LLM failed on ")]  # nothing left to offer
    for doc in ids[:7]:
        latest = db.list_suggestions(store, doc)[-1]
        assert (latest.status, latest.agent, latest.model_version) == (
            "ok", "zero-shot:minilm", "minilm/zs-v1/T=0.05/fallback")

    at.radio(key="ar_view").set_value("Review queue").run()
    suggestion = [m.value for m in at.markdown if m.value.startswith("**Suggestion:**")]
    assert suggestion and suggestion[0].endswith(
        f"by {md_plain('zero-shot:minilm')} ({md_plain('offline zero-shot, for a document the LLM failed on')})")
    store.close()
