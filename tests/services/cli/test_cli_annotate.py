"""`mrag-studio annotate`: headless pre-annotation of a stored corpus against a real store, with the
offline zero-shot annotator and with a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from services.cli.main import main  # noqa: E402
from tests.support.mini_corpus import mini_store  # noqa: E402
from tests.support.openai_server import Reply, by_content, by_document, fake_openai  # noqa: E402

__all__ = ["fake_openai"]

SECRET = "sk-test-do-not-print-0123456789"


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    u, store, _, _ = mini_store(tmp_path, monkeypatch)
    store.close()
    return u


def _annotate(url: str, *extra: str) -> int:
    return main(["annotate", "--corpus", "Mini", "--database", url, *extra])


def _suggestions(url: str) -> dict[str, tuple[str, str | None]]:
    """``{document title: (status, suggested category)}`` of the newest suggestion per document."""
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    names = {c.id: c.name for c in db.list_categories(store, corpus.id)}
    out = {}
    for doc in db.list_documents(store, corpus.id).items:
        rows = db.list_suggestions(store, doc.id)
        if rows:
            newest = max(rows, key=lambda r: r.id)
            out[doc.title] = (newest.status, names.get(newest.category_id))
    store.close()
    return out


def test_zero_shot_suggests_each_document_once(url: str, capsys) -> None:
    assert _annotate(url) == 0  # no endpoint configured: auto is the offline annotator
    captured = capsys.readouterr()
    assert "annotator: offline zero-shot (minilm similarity" in captured.err
    assert "no LLM endpoint is configured" in captured.err
    line = captured.out.strip()
    assert line.startswith("Mini: 4 suggestions stored, 0 failed, by zero-shot") and line.endswith(
        "0 already had one")
    assert _suggestions(url) == {"Moon": ("ok", "space"), "Mars": ("ok", "space"), "Bread": ("ok", "food"),
                                 "Soup": ("ok", "food")}
    assert _annotate(url, "--annotator", "zero-shot") == 0
    assert "every document already has a suggestion from zero-shot" in capsys.readouterr().out
    assert _annotate(url, "--undecided-only") == 0  # the Mini documents were imported with their labels
    assert "every document without a label decision already has a suggestion" in capsys.readouterr().out


def _llm_answer(prompt: str) -> Reply | str:
    if "Soup" in prompt:
        return "I think this is about cooking, but I cannot say which category."  # no JSON: a failed suggestion
    label = "space" if ("Moon" in prompt or "Mars" in prompt) else "food"
    return json.dumps({"label": label, "confidence": 0.9, "reason": "the text says so"})


def test_llm_failures_are_counted_and_asked_again_and_the_key_is_never_shown(url: str, capsys, monkeypatch,
                                                                              fake_openai) -> None:
    server = fake_openai(by_document(_llm_answer))
    server.set_env(monkeypatch)
    monkeypatch.setenv("MRAG_LLM_API_KEY", SECRET)
    assert _annotate(url, "--annotator", "llm") == 0
    captured = capsys.readouterr()
    assert f"annotator: LLM, model 'fake-model' at {server.base_url}" in captured.err
    assert captured.out.strip().startswith("Mini: 3 suggestions stored, 1 failed, by llm")
    assert "failed by cause: 1 no valid category in the answer (parse)" in captured.err.splitlines()
    assert "note: 2 unusable answers asked again with a changed prompt and temperature: 0 named a category " \
           "then." in captured.err
    assert any(line.startswith("failed: document ") for line in captured.err.splitlines())
    assert "the same command asks again for the failed ones" in captured.err
    got = _suggestions(url)
    assert got["Soup"][0] == "failed" and {t: got[t] for t in ("Moon", "Mars", "Bread")} == {
        "Moon": ("ok", "space"), "Mars": ("ok", "space"), "Bread": ("ok", "food")}
    sent = len(server.requests)
    assert sent == 6  # Soup three times: the first prompt, a correction, the name only
    assert _annotate(url) == 0  # auto: the configured LLM; only the failed document is asked again
    assert len(server.requests) == sent + 3
    again = capsys.readouterr()
    assert again.out.strip().startswith("Mini: 0 suggestions stored, 1 failed")
    assert SECRET not in captured.out + captured.err + again.out + again.err
    assert all(h.get("authorization") == f"Bearer {SECRET}" for h in server.request_headers)  # it was sent, though
    store = db.open_store(url)
    with store.engine.connect() as conn:  # neither suggestions nor the LLM cache store the key
        dump = "\n".join(str(row) for table in ("suggestions", "llm_cache")
                         for row in conn.exec_driver_sql(f"SELECT * FROM {table}"))
    store.close()
    assert dump and SECRET not in dump


def test_ctrl_c_stops_within_a_second_and_the_next_call_resumes(url: str, capsys, monkeypatch, fake_openai) -> None:
    """A Ctrl+C while the first document is asked (its answer takes 5 s): the command does not wait for it, stores
    nothing of it, and ends within a second; the next call asks for all four."""
    import time

    sent: list[str] = []
    pressed: list[float] = []

    def answer(prompt: str) -> Reply | str:
        sent.append(prompt)
        if len(sent) == 1:
            pressed.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl+C while the first document is asked
            return Reply.ok(str(_llm_answer(prompt)), delay_s=5.0)
        return _llm_answer(prompt.replace("Soup", "Stew"))

    server = fake_openai(by_document(answer))
    server.set_env(monkeypatch)
    monkeypatch.setenv("MRAG_LLM_TIMEOUT", "30")
    before = signal.getsignal(signal.SIGINT)
    assert _annotate(url, "--batch-size", "1") == 1
    took = time.monotonic() - pressed[0]
    assert took < 1.0, f"the command took {took:.2f} s to stop"
    captured = capsys.readouterr()
    assert "stopping now: the answers received are stored, the requests in flight abandoned (Ctrl+C again to " \
           "stop at once)" in captured.err
    assert "stopped with 4 documents left; run the same command again to resume" in captured.err
    assert captured.out.strip().startswith("Mini: 0 suggestions stored, 0 failed")
    assert signal.getsignal(signal.SIGINT) is before
    assert len(_suggestions(url)) == 0 and len(sent) == 1
    assert _annotate(url, "--batch-size", "1") == 0
    assert capsys.readouterr().out.strip().startswith("Mini: 4 suggestions stored, 0 failed")
    assert len(sent) == 5 and len(_suggestions(url)) == 4


def test_bad_input_is_one_line_and_writes_nothing(url: str, capsys, monkeypatch) -> None:
    assert main(["annotate", "--corpus", "Nope", "--database", url]) == 2
    assert capsys.readouterr().err.strip() == "error: unknown corpus 'Nope' (corpora: 'Mini')"
    assert _annotate(url, "--annotator", "llm") == 2
    assert capsys.readouterr().err.strip() == (
        "error: --annotator llm needs an OpenAI-compatible LLM endpoint, and none is configured: set "
        "MRAG_LLM_BASE_URL and MRAG_LLM_MODEL (and MRAG_LLM_API_KEY if it needs one)")
    monkeypatch.setenv("MRAG_LLM_MODEL", "m")
    monkeypatch.setenv("MRAG_LLM_TIMEOUT", "soon")
    assert _annotate(url) == 2
    assert capsys.readouterr().err.strip().startswith("error: the LLM endpoint settings are unusable: ")
    store = db.open_store(url)
    empty = db.create_corpus(store, "Unlabelled")
    db.add_documents(store, empty.id, [{"title": "A", "text": "no label here"}])
    db.create_corpus(store, "Empty")
    store.close()
    assert main(["annotate", "--corpus", "Unlabelled", "--database", url]) == 2
    assert capsys.readouterr().err.strip().startswith("error: corpus 'Unlabelled' has no categories")
    assert _suggestions(url) == {}


def test_an_endpoint_that_fails_for_every_request_stops_the_run_across_batches(url: str, capsys, monkeypatch,
                                                                               fake_openai) -> None:
    """A refused key: one request is sent, not one per batch, and the message says the endpoint failed (not that
    the user stopped it)."""
    server = fake_openai(lambda body: Reply.error(401, "Incorrect API key provided"))
    server.set_env(monkeypatch)
    assert _annotate(url, "--batch-size", "1") == 1
    captured = capsys.readouterr()
    assert len(server.requests) == 1
    assert captured.out.strip().startswith("Mini: 0 suggestions stored, 1 failed")
    assert any(line.startswith("failed: document ") and "HTTP 401" in line for line in captured.err.splitlines())
    *_, stop, last = captured.err.strip().splitlines()
    # the cause of the stop and what to do about it, then what is left
    assert stop.startswith("stopped: API key refused (auth): LLM request to model 'fake-model' at ")
    assert stop.endswith("failed: HTTP 401: Incorrect API key provided. Check the API key. What to do: check "
                         "MRAG_LLM_API_KEY.")
    assert last == "stopped with 4 documents left; fix that, then run the same command again to resume"


def test_a_corpus_another_process_pre_annotates_is_refused_by_name(url: str, capsys, monkeypatch,
                                                                   fake_openai) -> None:
    """The app (another process) pre-annotates "Mini": the CLI names the corpus, its id and since when, asks
    nothing and stores nothing (exit status 2)."""
    from datetime import datetime

    from sqlalchemy import update

    from db.models import AppMarker
    from services.workflows.annotation import preannotation_lease

    server = fake_openai(by_content(_llm_answer))
    server.set_env(monkeypatch)
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    lease = preannotation_lease(corpus.id)
    db.take_lease(store, lease, "gpu-box pid 4242 #0badc0de", "Pre-annotation of corpus", corpus.id)
    with store.session() as session:
        session.execute(update(AppMarker).where(AppMarker.name == lease)
                        .values(created_at=datetime(2026, 11, 24, 12, 0, 5)))
    store.close()
    assert _annotate(url) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        f"error: Pre-annotation of corpus 'Mini' (#{corpus.id}) is already running in another process (gpu-box pid "
        "4242; started 2026-11-24 12:00:05 UTC, last heard from ")
    assert server.requests == [] and _suggestions(url) == {}


def test_a_category_is_not_deleted_or_merged_while_a_run_pre_annotates_the_corpus(url: str, capsys, monkeypatch,
                                                                                   fake_openai) -> None:
    """A real run (``mrag-studio annotate`` in another process) holds the corpus' lease; the endpoint
    holds its first answer until the test has tried to delete and merge a category, from the workflow and from the
    CLI. Before, the deletion went through and the run aborted with "category N is not a category of the
    document's corpus". Now both are refused naming the run, the run ends normally with every suggestion stored,
    and afterwards the deletion goes through."""
    import subprocess
    import sys
    import threading

    from services.workflows import annotation as aw

    asked, answer = threading.Event(), threading.Event()

    def held(prompt: str) -> Reply | str:
        asked.set()
        answer.wait(60)
        return _llm_answer(prompt)

    server = fake_openai(by_document(held))
    env = {**os.environ, "MRAG_LLM_BASE_URL": server.base_url, "MRAG_LLM_MODEL": "fake-model",
           "MRAG_LLM_MAX_RETRIES": "0", "MRAG_LLM_TIMEOUT": "60", "MRAG_LLM_CONCURRENCY": "1",
           "PYTHONUNBUFFERED": "1"}
    root = Path(__file__).resolve().parents[3]
    run = subprocess.Popen([sys.executable, "-m", "services", "annotate", "--corpus", "Mini", "--annotator", "llm",
                            "--database", url], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        assert asked.wait(120), run.stderr.read() if run.poll() is not None else "no request"
        store = db.open_store(url)
        corpus = db.get_corpus_by_name(store, "Mini")
        before = [(c.id, c.name) for c in db.list_categories(store, corpus.id)]
        refusal = (f"Cannot delete category 'food' now: Pre-annotation of corpus 'Mini' (#{corpus.id}) is running in "
                   "another process (")
        with pytest.raises(aw.CategoryInUse) as caught:
            aw.delete_category(store, corpus.id, "food", confirm=True)
        assert str(caught.value).startswith(refusal) and f"pid {run.pid}, last heard from " in str(caught.value)
        assert str(caught.value).endswith("It stores its suggestions under the corpus' categories, so deleting or "
                                          "merging one of them under it would abort it. Wait until it ends, or stop "
                                          "it, then try again.")
        with pytest.raises(aw.CategoryInUse, match="^Cannot merge category 'food' now: Pre-annotation of corpus"):
            aw.rename_category(store, corpus.id, "food", "space", merge=True)
        with pytest.raises(aw.CategoryInUse, match="^Cannot delete category 'food' now"):
            aw.delete_category(store, corpus.id, "food", move_to="space")
        capsys.readouterr()
        assert main(["corpora", "--corpus", "Mini", "--delete-category", "food", "--yes", "--database", url]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {refusal}") and err.rstrip().endswith("then try again. Nothing was changed.")
        assert [(c.id, c.name) for c in db.list_categories(store, corpus.id)] == before
    finally:
        answer.set()
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert out.strip().startswith("Mini: 3 suggestions stored, 1 failed, by llm")  # Soup: no JSON, as always
    assert "is not a category" not in out + err
    got = _suggestions(url)
    assert {t: got[t] for t in ("Moon", "Mars", "Bread")} == {
        "Moon": ("ok", "space"), "Mars": ("ok", "space"), "Bread": ("ok", "food")}
    assert aw.delete_category(store, corpus.id, "food", confirm=True).startswith("Deleted category 'food'")
    store.close()
