"""`mrag-studio generate` against a real local OpenAI-compatible server whose answer for one story is
unusable: the run ends (exit 0, every plan stored) and says that a query failed, why, and that the same command
asks again for it; the same command then replaces the failed row with a story, sending only that one request."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from services.cli.main import main  # noqa: E402
from tests.support.mini_corpus import mini_store  # noqa: E402
from tests.support.openai_server import FakeOpenAIServer, last_user_message  # noqa: E402


def _story(titles: list[str]) -> str:
    return "Once upon a time " + " and ".join(titles) + " met in one long story that names every one of them."


def test_failed_queries_are_named_and_the_same_command_asks_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url, store, corpus_id, _ = mini_store(tmp_path, monkeypatch)
    corpus = db.get_corpus(store, corpus_id)
    store.close()
    refuse = {"on": True}

    def respond(body: dict) -> str:
        titles = re.findall(r"^Article \d+: (.+)$", last_user_message(body), flags=re.MULTILINE)
        if refuse["on"] and len(titles) == 2:
            return "I cannot."  # too short to be a story: the query fails
        return _story(titles)

    with FakeOpenAIServer(respond) as server:
        server.set_env(monkeypatch)
        monkeypatch.setenv("MRAG_LLM_MAX_RETRIES", "0")
        args = ["generate", "--corpus", corpus.name, "--database", url, "--name", "Told", "--aspects", "1,2",
                "--per-count", "1", "--fusion", "0", "--generator", "llm"]
        assert main(args) == 0
        captured = capsys.readouterr()
        assert "1 ok, 0 flagged, 1 failed now; 2 of 2 stored" in captured.out
        assert ("1 query failed (first: The LLM answer is too short to be a story about 2 article(s) (2 words, at "
                "least 10 expected): 'I cannot.'); run the same command again to ask again for it") in captured.err
        sent = len(server.requests)
        refuse["on"] = False
        assert main(args) == 0
        captured = capsys.readouterr()
        assert "1 ok, 0 flagged, 0 failed now; 2 of 2 stored" in captured.out and "query failed" not in captured.err
        assert len(server.requests) == sent + 1
    store = db.open_store(url)
    (qs,) = db.list_query_sets(store)
    assert sorted(q.status for q in db.list_queries(store, qs.id)) == ["ok", "ok"]
    store.close()
