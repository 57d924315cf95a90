"""``mrag-studio annotate`` stopped mid-batch by Ctrl+C keeps what its progress line counted, and its
summary counts what is stored. A second Ctrl+C (stop at once) dropped the answers the batch had received and said
only 'interrupted'; a first one let the progress line count the documents it cancelled ('documents: 4/4' with 2
stored). A Ctrl+C does not wait for the answers in flight: they are discarded (issue 36). Real SQLite file, real
OpenAI-compatible HTTP server on 127.0.0.1, real SIGINTs."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import db
from services.cli import annotate as cli_annotate
from services.cli.main import main
from tests.support.mini_corpus import mini_store
from tests.support.openai_server import Reply, by_document, fake_openai
from tests.support.preannotate_progress import watch_preannotate_progress

__all__ = ["fake_openai"]


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "MRAG_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MRAG_LLM_CONCURRENCY", "1")  # one request at a time: Moon, Mars, Bread, Soup in order
    u, store, _, _ = mini_store(tmp_path, monkeypatch)
    store.close()
    return u


def _annotate(url: str) -> int:
    return main(["annotate", "--corpus", "Mini", "--database", url, "--batch-size", "4"])


def _rows(url: str) -> dict[str, list[tuple[str, str | None]]]:
    """``{document title: [(status, category), ...]}`` of the documents with a suggestion row."""
    store = db.open_store(url)
    corpus = db.get_corpus_by_name(store, "Mini")
    out = {}
    for doc in db.list_documents(store, corpus.id).items:
        rows = db.list_suggestions(store, doc.id)
        if rows:
            out[doc.title] = [(r.status, r.category) for r in rows]
    store.close()
    return out


def _cache_entries(url: str) -> int:
    """How many answers the LLM cache holds."""
    store = db.open_store(url)
    try:
        return db.llm_cache_stats(store).n_entries
    finally:
        store.close()


def _title(prompt: str) -> str:
    return prompt.split("Document title: ")[1].split("\n")[0]


def _label(prompt: str) -> str:
    return json.dumps({"label": "space" if _title(prompt) in ("Moon", "Mars") else "food", "confidence": 0.9,
                       "reason": "the text says so"})


def _progress_lines(err: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"^documents: (\d+)/(\d+)$", err, re.MULTILINE)]


def _counting_interrupts(real: Any, handled: list[threading.Event]) -> Any:
    """``stop_on_ctrl_c`` whose SIGINT handler sets ``handled[n]`` as it takes the n-th Ctrl+C (then acts), so the
    test knows the first Ctrl+C was taken before it presses the second (two at once would be taken as one)."""

    @contextmanager
    def wrapped(cancel: threading.Event, *message: str) -> Iterator[threading.Event]:
        with real(cancel, *message) as pressed:
            inner = signal.getsignal(signal.SIGINT)
            count = iter(handled)

            def handler(signum: int, frame: Any) -> None:
                next(count).set()
                inner(signum, frame)

            signal.signal(signal.SIGINT, handler)
            yield pressed

    return wrapped


def test_a_first_ctrl_c_mid_batch_counts_only_the_stored_documents(url: str, capsys, monkeypatch,
                                                                   fake_openai) -> None:
    handled = threading.Event()
    sent: list[str] = []

    def answer(prompt: str) -> Reply | str:
        sent.append(_title(prompt))
        if len(sent) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C while Mars is asked: Bread and Soup are not sent
            assert handled.wait(10)
            return Reply.ok(str(_label(prompt)), delay_s=5.0)  # Mars's answer would take 5 s: not waited for
        return _label(prompt)

    fake_openai(by_document(answer)).set_env(monkeypatch)
    monkeypatch.setenv("MRAG_LLM_TIMEOUT", "30")
    monkeypatch.setattr(cli_annotate, "stop_on_ctrl_c", _counting_interrupts(cli_annotate.stop_on_ctrl_c, [handled]))
    started = time.monotonic()
    assert _annotate(url) == 1
    assert time.monotonic() - started < 3.0  # not the 5 s of Mars's answer
    err = capsys.readouterr()
    assert err.out.strip().startswith("Mini: 1 suggestion stored, 0 failed, by llm:fake-model")
    assert "stopped with 3 documents left; run the same command again to resume" in err.err
    assert sent == ["Moon", "Mars"] and _rows(url) == {"Moon": [("ok", "space")]}
    lines = _progress_lines(err.err)
    assert lines and all(done <= 1 for done, _ in lines), lines  # never more than stored ('4/4' before)


def test_a_second_ctrl_c_stores_the_answers_received_and_says_what_is_stored(url: str, capsys, monkeypatch,
                                                                            fake_openai) -> None:
    handled = [threading.Event(), threading.Event()]
    sent: list[str] = []

    def answer(prompt: str) -> Reply | str:
        sent.append(_title(prompt))
        if sent == ["Moon", "Mars", "Bread"]:  # Moon and Mars answered; Ctrl+C twice while Bread is asked
            assert progress.wait_for(2)  # the calling thread has taken Moon's and Mars's answers
            for event in handled:
                os.kill(os.getpid(), signal.SIGINT)
                assert event.wait(10)
        return _label(prompt)

    progress = watch_preannotate_progress(monkeypatch)
    fake_openai(by_document(answer)).set_env(monkeypatch)
    before, real = signal.getsignal(signal.SIGINT), cli_annotate.stop_on_ctrl_c
    monkeypatch.setattr(cli_annotate, "stop_on_ctrl_c", _counting_interrupts(real, handled))
    assert _annotate(url) == 130
    assert signal.getsignal(signal.SIGINT) is before
    captured = capsys.readouterr()
    assert captured.out.strip().startswith("Mini: 2 suggestions stored, 0 failed, by llm:fake-model")
    assert captured.err.strip().splitlines()[-1] == (
        "stopped with 2 documents left; run the same command again to resume")
    # the two answers the batch received are stored; Bread's (in flight) is discarded, not even cached
    assert _rows(url) == {"Moon": [("ok", "space")], "Mars": [("ok", "space")]}
    assert sent == ["Moon", "Mars", "Bread"]
    assert _cache_entries(url) == 2  # Moon and Mars

    monkeypatch.setattr(cli_annotate, "stop_on_ctrl_c", real)
    assert _annotate(url) == 0
    assert capsys.readouterr().out.strip().startswith("Mini: 2 suggestions stored, 0 failed")
    assert sent == ["Moon", "Mars", "Bread", "Bread", "Soup"]  # Bread asked again
    assert _rows(url) == {"Moon": [("ok", "space")], "Mars": [("ok", "space")], "Bread": [("ok", "food")],
                          "Soup": [("ok", "food")]}
