"""Pre-annotation in a real browser against a slow local model that answers off the category list (issue 36: with
SmolLM2-135M, 6 of 41 documents got a suggestion, the stop named the wrong cause and Cancel took 17 s).

The endpoint is a real OpenAI-compatible server on 127.0.0.1 with one slot (requests queue, each answer takes
0.6 s: four at once make the fourth wait 2.4 s, past the app's 2 s timeout), answering like a small model
(:class:`tests.support.small_model.SmallModel`: 60% of first answers off the list) and refusing JSON-schema output
with HTTP 400. The test

1. starts a run while the server hangs and presses Cancel with requests in flight: the page says the run is
   cancelled within a second (measured from the click) and the server sees the requests go;
2. runs again: the page shows the requests in flight lowered after timeouts; midway the server stops keeping up,
   and the run stops naming the timeout and its advice, the error its stopped document stores;
3. resumes with the server back: suggestions are stored for most documents, and the page notes the JSON-schema
   refusal.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.browser.conftest import ARTIFACTS, AppServer, wait_idle
from tests.support.openai_server import FAKE_MODEL, FakeOpenAIServer
from tests.support.small_model import SmallModel
from tests.support.topic_corpus import add_topic_corpus, truth

# timing-bound (cancel within 1 s, ~80 s against a slow server): run with -m slow, as
# bench/preannotate_slow_llm.py measures
pytestmark = [pytest.mark.browser, pytest.mark.slow]

N_DOCS = 24
CORPUS = "Annotator's slow model"  # sorts before the demo corpus: the page opens on it
START = re.compile(r"^(Start pre-annotation|Resume \(\d+ left\))$")


@pytest.fixture(scope="module")
def slow_llm():
    """The one-slot small-model server (started here, stopped at the end)."""
    model = SmallModel(truth, delay_s=0.6, schema="refuse", hang_s=60.0)
    server = FakeOpenAIServer(model, slots=1).start()
    try:
        yield model, server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def slow_app(tmp_path_factory, slow_llm):
    """The app with the LLM endpoint of :func:`slow_llm` (2 s timeout, 4 requests at once, 2 retries) and a corpus
    of :data:`N_DOCS` unlabelled documents in four categories."""
    import db

    folder = tmp_path_factory.mktemp("browser-slow-llm")
    store = db.open_store(f"sqlite:///{folder / 't.db'}")
    try:
        corpus_id, _ = add_topic_corpus(store, CORPUS, N_DOCS)
    finally:
        store.close()
    _model, server = slow_llm
    app = AppServer(folder, env={"MRAG_LLM_BASE_URL": server.base_url, "MRAG_LLM_MODEL": FAKE_MODEL,
                                 "MRAG_LLM_TIMEOUT": "2", "MRAG_LLM_CONCURRENCY": "4", "MRAG_LLM_MAX_RETRIES": "2"})
    app.start()
    try:
        yield app, corpus_id
    finally:
        app.stop()


def _open_preannotate(page, url: str) -> None:
    page.goto(f"{url}/Annotate_and_Review")
    page.locator('[data-testid="stRadioOption"]').filter(has_text="Pre-annotate").click(timeout=180_000)
    page.get_by_role("button", name=START).wait_for()
    wait_idle(page)


def _ok_suggestions(folder, corpus_id: int) -> int:
    import db

    store = db.open_store(f"sqlite:///{folder / 't.db'}")
    try:
        ids = db.document_ids(store, corpus_id)
        return sum(any(s.status == "ok" and s.agent == f"llm:{FAKE_MODEL}" for s in db.list_suggestions(store, d))
                   for d in ids)
    finally:
        store.close()


def test_preannotation_against_a_slow_off_list_model(slow_llm, slow_app, browser_page):
    model, server = slow_llm
    app, corpus_id = slow_app
    page = browser_page
    page.set_default_timeout(60_000)
    ARTIFACTS.mkdir(exist_ok=True)
    _open_preannotate(page, app.url)
    page.get_by_text("up to 2 retries, 1 after a timeout", exact=False).wait_for()  # the retries it really gets

    # 1. Cancel with requests in flight (the server hangs): the page says so within a second
    model.hang.set()
    page.get_by_role("button", name=START).click()
    page.get_by_text(re.compile(r"^4 requests in flight")).wait_for(timeout=30_000)
    clicked = time.monotonic()
    page.get_by_role("button", name="Cancel").click()
    page.get_by_text("Pre-annotation cancelled; every finished batch is kept.", exact=False).wait_for(timeout=30_000)
    cancel_s = time.monotonic() - clicked
    page.screenshot(path=str(ARTIFACTS / "browser_preannotate_cancelled.png"), full_page=True)
    deadline = time.monotonic() + 2
    while server.in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    print(f"cancel took {cancel_s:.2f} s from the click to the page saying so")
    assert cancel_s < 1.0, f"the cancel took {cancel_s:.2f} s"
    assert server.in_flight == 0 and server.abandoned >= 4  # the requests in flight were aborted, not waited for
    wait_idle(page)

    # 2. A run that adapts to the slow server, then stops when it stops keeping up: the cause is the timeout
    model.hang.clear()
    page.get_by_role("button", name=START).click()
    page.get_by_text(re.compile(r"at most [12] at a time \(lowered from 4 after \d+ timeouts?\)")).wait_for(
        timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "browser_preannotate_lowered.png"), full_page=True)
    page.get_by_text(re.compile(r"^(1[2-9]|2\d) / \d+ documents annotated$")).wait_for(timeout=120_000)
    model.hang.set()  # the server stops keeping up
    stop = page.get_by_text(re.compile(r"^Pre-annotation stopped: ")).first
    stop.wait_for(timeout=120_000)
    message = stop.inner_text().replace("\u2060", "")  # the word joiner that keeps a URL in a message unlinked
    page.screenshot(path=str(ARTIFACTS / "browser_preannotate_stopped.png"), full_page=True)
    assert message.startswith("Pre-annotation stopped: no answer in time (timeout): LLM request to model "
                              f"'{FAKE_MODEL}' at ")
    assert "no answer within 2 s (MRAG_LLM_TIMEOUT), 3 times (the last try with one request in flight)." in message
    assert ("What to do: raise MRAG_LLM_TIMEOUT (now 2 s), or lower MRAG_LLM_CONCURRENCY (now 4): a small local "
            "server answers one request at a time") in message
    assert "no valid category" not in message
    import db

    store = db.open_store(f"sqlite:///{app.folder / 't.db'}")
    try:
        stored = [s.error for d in db.document_ids(store, corpus_id) for s in db.list_suggestions(store, d)
                  if s.error.startswith("timeout: ")]
    finally:
        store.close()
    # the page's cause is the error the document that stopped the run stores (with one request in flight, it
    # timed out again)
    assert any(error.removeprefix("timeout: ").rstrip(".") in message for error in stored)
    assert all("no answer within 2 s (MRAG_LLM_TIMEOUT)" in error for error in stored)
    wait_idle(page)

    # 3. Resume with the server back: most documents get a suggestion
    model.hang.clear()
    page.get_by_role("button", name=START).click()
    page.get_by_text(re.compile(r"^Pre-annotation finished: ")).wait_for(timeout=180_000)
    page.get_by_text("The endpoint refused JSON-schema output (HTTP 400: response_format type", exact=False) \
        .wait_for()
    page.screenshot(path=str(ARTIFACTS / "browser_preannotate_finished.png"), full_page=True)
    ok = _ok_suggestions(app.folder, corpus_id)
    print(f"suggestions stored: {ok} of {N_DOCS}")
    assert ok >= 0.8 * N_DOCS, f"only {ok} of {N_DOCS} documents got a suggestion"
