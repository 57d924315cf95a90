"""``mrag-studio annotate`` against a slow endpoint: the stop names its cause and what to do, as the stored
failures and the Annotate and Review page do, and says when it lowers its concurrency; ``--fallback zero-shot``
gives the documents the LLM failed on an offline suggestion, marked as such (issue 36). Real SQLite file, real
OpenAI-compatible server on 127.0.0.1, real MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import db
from services.cli.main import main
from tests.support.mini_corpus import mini_store
from tests.support.openai_server import Reply, by_document, fake_openai

__all__ = ["fake_openai"]


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    u, store, _, _ = mini_store(tmp_path, monkeypatch)
    store.close()
    return u


def _latest(url: str) -> dict[str, db.SuggestionRow]:
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, "Mini")
        return {d.title: db.list_suggestions(store, d.id)[-1] for d in db.list_documents(store, corpus.id).items
                if db.list_suggestions(store, d.id)}
    finally:
        store.close()


def test_a_run_stopped_by_timeouts_says_why_and_what_to_do(url: str, capsys, monkeypatch, fake_openai) -> None:
    fake_openai(lambda body: Reply.slow(5.0, "late")).set_env(monkeypatch)
    monkeypatch.setenv("MRAG_LLM_TIMEOUT", "0.3")
    monkeypatch.setenv("MRAG_LLM_CONCURRENCY", "2")
    assert main(["annotate", "--corpus", "Mini", "--database", url]) == 1
    err = capsys.readouterr().err.splitlines()
    # both first requests were sent at 2 in flight and time out together: the first lowers the limit, the second
    # (same round) does not; the line counts the timeouts seen by the time it is printed, one or both
    (lowered,) = [line for line in err if line.startswith("requests in flight ")]
    assert lowered in ("requests in flight lowered to 1 (of 2; 1 timeout so far)",
                       "requests in flight lowered to 1 (of 2; 2 timeouts so far)")
    # the limit stays at 1 (nothing answered to raise it), and the summary's note gives the whole count: the 4
    # documents' tries, 2 each before the last, then Moon's third
    assert "note: Requests in flight lowered from 2 to 1 after 9 timeouts (MRAG_LLM_CONCURRENCY 2; 1 at the end)." \
        in err
    (stop,) = [line for line in err if line.startswith("stopped: ")]
    assert stop.startswith("stopped: no answer in time (timeout): LLM request to model 'fake-model' at ")
    assert stop.endswith("failed: no answer within 0.3 s (MRAG_LLM_TIMEOUT), 3 times (the last try with one request "
                         "in flight). What to do: raise MRAG_LLM_TIMEOUT (now 0.3 s), or lower MRAG_LLM_CONCURRENCY "
                         "(now 2): a small local server answers one request at a time, so the others wait in its "
                         "queue.")
    assert err[-1].startswith("stopped with 4 documents left; fix that, then run the same command again")
    failed = [s for s in _latest(url).values() if s.status == "failed"]
    # the stored failure says what the stop line says
    assert failed and any(stop.removeprefix("stopped: no answer in time (timeout): ").startswith(
        s.error.removeprefix("timeout: ")) for s in failed)


def test_fallback_gives_the_documents_the_llm_failed_on_an_offline_suggestion(url: str, capsys, monkeypatch,
                                                                             fake_openai) -> None:
    def answer(prompt: str) -> str:
        if "Soup" in prompt:
            return "Hard to say."  # to every prompt: Soup fails
        label = "space" if ("Moon" in prompt or "Mars" in prompt) else "food"
        return json.dumps({"label": label, "confidence": 0.9, "reason": "the text says so"})

    fake_openai(by_document(answer)).set_env(monkeypatch)
    assert main(["annotate", "--corpus", "Mini", "--database", url, "--fallback", "zero-shot"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Mini: 3 suggestions stored, 1 failed, by llm:fake-model")
    assert out[1] == ("Mini: offline fallback for the 1 document the LLM failed on: 1 suggestion stored, 0 failed, "
                      "by zero-shot:minilm (marked as a fallback in the review queue)")
    latest = _latest(url)
    soup = latest["Soup"]
    assert (soup.status, soup.agent, soup.model_version) == ("ok", "zero-shot:minilm", "minilm/zs-v1/T=0.05/fallback")
    assert soup.reason.startswith("offline fallback, llm:fake-model failed on this document (parse: ")
    assert {t: (s.agent, s.status) for t, s in latest.items() if t != "Soup"} == {
        t: ("llm:fake-model", "ok") for t in ("Moon", "Mars", "Bread")}
    # the LLM still has Soup to do; the fallback has nothing left
    assert main(["annotate", "--corpus", "Mini", "--database", url, "--fallback", "zero-shot"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "Mini: no document the LLM failed on lacks an offline suggestion"
    assert main(["annotate", "--corpus", "Mini", "--database", url, "--annotator", "zero-shot", "--fallback",
                 "zero-shot"]) == 2
    assert capsys.readouterr().err.strip() == "error: --fallback zero-shot follows an LLM run (--annotator llm or auto)"
