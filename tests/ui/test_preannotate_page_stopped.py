"""Annotate & Review: a pre-annotation the page stops mid-batch (Streamlit raises inside the progress bar's update,
as when the user presses Cancel) stores the documents the run had annotated, the stopped batch's too, and the stop
message says how many. The stopped batch's answers were dropped (kept only in the LLM cache): the bar said
'2 / 4 documents annotated' and the stop left none stored."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.local_script_runner import LocalScriptRunner

import db
from tests.support.openai_server import Reply, fake_openai, last_user_message
from tests.support.preannotate_progress import ProgressWatch, watch_preannotate_progress

__all__ = ["fake_openai"]
REVIEW_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "2_Annotate_and_Review.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


@pytest.fixture
def runners(monkeypatch: pytest.MonkeyPatch) -> list[LocalScriptRunner]:
    """The script runner of each page run, in turn: the test stops (or reruns) the one that pre-annotates from the
    fake endpoint's thread, as Streamlit does when the user presses Cancel."""
    made: list[LocalScriptRunner] = []
    real_init = LocalScriptRunner.__init__

    def init(self: LocalScriptRunner, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(LocalScriptRunner, "__init__", init)
    return made


@pytest.fixture
def bar(monkeypatch: pytest.MonkeyPatch) -> ProgressWatch:
    """The page's progress bar as counted: the fake endpoint's thread waits for it before it stops or reruns the
    page, as a user acts on what the bar said (:mod:`tests.support.preannotate_progress`)."""
    return watch_preannotate_progress(monkeypatch)


def _start_one_batch_of_four(server: Any, monkeypatch: pytest.MonkeyPatch, categories: list[dict[str, str]],
                             text: str) -> tuple[db.Store, list[int], AppTest]:
    """Corpus "Tiny" with ``categories`` and documents D0..D3 (``text.format(i=i)``), and its Review page's
    pre-annotation started against ``server`` in one batch of 4, one request at a time (D0, D1, D2, D3 in turn):
    (the store, the document ids, the page after the run)."""
    server.set_env(monkeypatch)
    monkeypatch.setenv("MRAG_LLM_CONCURRENCY", "1")
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    c = db.create_corpus(store, "Tiny")
    db.add_categories(store, c.id, categories)
    ids = db.add_documents(store, c.id, [{"title": f"D{i}", "text": text.format(i=i)}
                                         for i in range(4)]).document_ids
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = c.id
    at.run()
    at.radio(key="ar_view").set_value("Pre-annotate").run()
    at.number_input(key="pa_batch").set_value(4).run()  # one batch of 4: the stop comes in its middle
    at.button(key="pa_start").click().run()
    return store, list(ids), at


def test_a_run_stopped_mid_batch_keeps_what_it_annotated_and_says_so(runners: list[LocalScriptRunner],
                                                                     bar: ProgressWatch, monkeypatch,
                                                                     fake_openai) -> None:
    sent: list[str] = []

    def respond(body: dict[str, Any]) -> Reply | str:
        title = last_user_message(body).split("Document title: ")[1].split("\n")[0]
        sent.append(title)
        if len(sent) == 3:  # D0 and D1 answered, the bar said 2 / 4: the user stops the page
            assert bar.wait_for(2)
            runners[-1].request_stop()
        return json.dumps({"label": "sport", "confidence": 0.8, "reason": "a match"})

    store, ids, at = _start_one_batch_of_four(fake_openai(respond), monkeypatch,
                                              [{"name": "sport", "description": "matches"}, {"name": "cooking"}],
                                              "The team played match number {i}.")
    assert not at.exception, [e.value for e in at.exception]
    # D2's answer came before the stop took effect (at the bar's update to 3 / 4): stored with D0 and D1
    assert {d: [(s.status, s.category) for s in db.list_suggestions(store, d)] for d in ids} == {
        ids[0]: [("ok", "sport")], ids[1]: [("ok", "sport")], ids[2]: [("ok", "sport")], ids[3]: []}
    assert sent[:3] == ["D0", "D1", "D2"]  # D3 too if the worker took it before the stop: then it is cached

    at.button(key="pa_cancel").click().run()  # the rerun the Cancel button starts
    assert [w.value for w in at.warning] == [
        "Pre-annotation cancelled; every finished batch is kept. Before it stopped it stored 3 suggestions and 0 "
        "failed (every document the progress bar counted, the stopped batch's too). Press Resume to continue."]
    assert at.button(key="pa_start").label == "Resume (1 left)"
    at.button(key="pa_start").click().run()
    assert at.success and "1 suggestion, 0 failed (3 documents already had one)" in at.success[0].value
    assert sorted(sent) == ["D0", "D1", "D2", "D3"]  # nothing asked twice
    assert all(len(db.list_suggestions(store, d)) == 1 for d in ids)  # one row each
    store.close()


def test_a_rerun_mid_batch_says_what_the_interrupted_run_stored(runners: list[LocalScriptRunner], bar: ProgressWatch,
                                                                monkeypatch, fake_openai) -> None:
    """The page reruns while the batch runs (another widget changed): the rerun raises in the progress bar's
    update; the documents answered so far are stored and the rerun's message counts them."""
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

    sent: list[str] = []

    def respond(body: dict[str, Any]) -> Reply | str:
        sent.append(last_user_message(body).split("Document title: ")[1].split("\n")[0])
        if len(sent) == 2:  # the page reruns while D1 is asked, once the bar said 1 / 4
            assert bar.wait_for(1)
            runners[-1].request_rerun(RerunData())
        return json.dumps({"label": "cooking", "confidence": 0.7, "reason": "a recipe"})

    store, ids, at = _start_one_batch_of_four(fake_openai(respond), monkeypatch,
                                              [{"name": "sport"}, {"name": "cooking", "description": "recipes"}],
                                              "Recipe number {i}.")  # the run, then the rerun it was interrupted by
    assert not at.exception, [e.value for e in at.exception]
    assert [d for d in ids if db.list_suggestions(store, d)] == ids[:2]
    assert [w.value for w in at.warning] == [
        "Pre-annotation interrupted (the page reran); every finished batch is kept. Before it stopped it stored 2 "
        "suggestions and 0 failed (every document the progress bar counted, the stopped batch's too). Press Resume "
        "to continue."]
    assert at.button(key="pa_start").label == "Resume (2 left)"
    store.close()
