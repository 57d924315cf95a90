"""`mrag-studio generate` against a real local OpenAI-compatible server that answers HTTP 500 to one story's
Fusion sub-queries request: the run ends (exit 0) and says that the story has no sub-queries and that the same
command asks for them; the same command then sends only that request (no second story), stores the sub-queries and
the query is ok, its story unchanged. Without the fix the second command said the set was complete and sent
nothing."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import db  # noqa: E402
from services.cli.main import main  # noqa: E402
from tests.support.mini_corpus import mini_store  # noqa: E402
from tests.support.openai_server import FakeOpenAIServer, Reply, is_fusion_request, last_user_message  # noqa: E402

LINES = ["one sub-query", "another sub-query"]



def test_the_same_command_asks_again_for_failed_fusion_sub_queries_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    url, store, corpus_id, _ = mini_store(tmp_path, monkeypatch)
    corpus = db.get_corpus(store, corpus_id)
    store.close()
    down = {"on": True}

    def respond(body: dict) -> Reply | str:
        prompt = last_user_message(body)
        if is_fusion_request(body):
            if down["on"] and "TWO-ASPECT" in prompt:
                return Reply.error(500, "model overloaded")
            return "\n".join(LINES)
        titles = re.findall(r"^Article \d+: (.+)$", prompt, flags=re.MULTILINE)
        kind = "TWO-ASPECT" if len(titles) == 2 else "ONE-ASPECT"
        return f"{kind} Once upon a time " + " and ".join(titles) + " met in one long story that names them all."

    with FakeOpenAIServer(respond) as server:
        server.set_env(monkeypatch)
        monkeypatch.setenv("MRAG_LLM_CONCURRENCY", "1")  # the 2-aspect plan after the 1-aspect one: nothing cut off
        args = ["generate", "--corpus", corpus.name, "--database", url, "--name", "Fused", "--aspects", "1,2",
                "--per-count", "1", "--fusion", "2", "--generator", "llm"]
        assert main(args) == 0
        captured = capsys.readouterr()
        assert "1 ok, 1 flagged, 0 failed now; 2 of 2 stored" in captured.out
        assert "1 query has no Fusion sub-queries: the endpoint failed on that request (first: Fusion sub-queries " \
               "failed: " in captured.err
        assert "run the same command again to ask for its sub-queries again (its story is kept)" in captured.err
        assert len(server.requests) == 4
        store = db.open_store(url)
        (qs,) = db.list_query_sets(store)
        (victim,) = [q for q in db.list_queries(store, qs.id) if q.status == "flagged"]
        store.close()
        assert victim.fusion == [] and victim.text.startswith("TWO-ASPECT")

        down["on"] = False
        assert main(args) == 0
        captured = capsys.readouterr()
        assert (f"resuming query set 'Fused' (#{qs.id}): 2 of 2 stored (1 without its Fusion sub-queries, asked for "
                "again with its story kept), with its own settings") in captured.err
        assert "Fusion sub-queries asked for again for 1 story: 1 now has them" in captured.err
        assert "0 ok, 0 flagged, 0 failed now; 2 of 2 stored" in captured.out
        assert "no Fusion sub-queries" not in captured.err
        assert len(server.requests) == 5 and is_fusion_request(server.requests[4])  # the sub-queries only, no story

        assert main(args) == 0  # complete now: nothing is sent
        assert capsys.readouterr().out.strip() == f"query set 'Fused' (#{qs.id}) is complete: 2 queries"
        assert len(server.requests) == 5
    store = db.open_store(url)
    fixed = db.get_query(store, victim.id)
    store.close()
    assert (fixed.status, fixed.error, fixed.fusion, fixed.text) == ("ok", "", LINES, victim.text)
