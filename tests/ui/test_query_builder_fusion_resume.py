"""Query Builder (AppTest, a fresh SQLite store, a real OpenAI-compatible server on 127.0.0.1):

* a generated story whose Fusion sub-queries request answered HTTP 500 is kept without sub-queries; the page says
  so, lists the set with Resume ("... without its Fusion sub-queries, asked for again with its story kept"), and
  Resume sends only that request: the query gets its sub-queries and is ok, its story unchanged. The set used to
  count as complete (no Resume), and the Regenerate button paid for a new story;
* the export's download name has no path characters: a set named ``runs/2024: v1`` downloads as
  ``runs_2024_v1.json`` (was ``runs/2024: v1.json``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402
from tests.support.openai_server import FakeOpenAIServer, Reply, is_fusion_request, last_user_message  # noqa: E402

QUERY_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "8_Query_Builder.py")
LINES = ["a sub-query", "another sub-query", "a third sub-query"]

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py



def test_resume_asks_only_for_the_fusion_sub_queries_the_endpoint_failed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    fusion_seen = {"n": 0, "fail": 2}  # the second (last) Fusion request of the first run answers 500

    def respond(body: dict) -> Reply | str:
        if is_fusion_request(body):
            fusion_seen["n"] += 1
            return Reply.error(500, "model overloaded") if fusion_seen["n"] == fusion_seen["fail"] else "\n".join(LINES)
        titles = re.findall(r"^Article \d+: (.+)$", last_user_message(body), flags=re.MULTILINE)
        return "In this long and winding story " + " and ".join(titles) + " played the main part among many others."

    with FakeOpenAIServer(respond) as server:
        server.set_env(monkeypatch)
        monkeypatch.setenv("MRAG_LLM_CONCURRENCY", "1")  # the failing request is the run's last: nothing cut off
        at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()
        assert not at.exception, at.exception
        at.text_input(key="qb_gen_name").set_value("Fused")
        at.multiselect(key="qb_gen_counts").set_value([1, 2])
        at.number_input(key="qb_gen_per").set_value(1)
        at.button(key="qb_gen_start").click().run()
        assert not at.exception, at.exception
        assert len(server.requests) == 4
        assert "Query set ready: 1 ok, 1 flagged, 0 failed." in [s.value for s in at.success]
        assert ("1 query has no Fusion sub-queries: the endpoint failed on that request. Resume below asks for them "
                "again and keeps the stories.") in [w.value for w in at.warning]
        store = db.open_store(os.environ["MRAG_DATABASE_URL"])
        corpus = db.list_corpora(store)[0]
        qs = next(s for s in db.list_query_sets(store, corpus.id) if s.name == "Fused")
        (victim,) = [q for q in db.list_queries(store, qs.id) if q.status == "flagged"]
        assert victim.fusion == [] and victim.error.startswith("Fusion sub-queries failed: ")
        assert any(m.value == "'Fused': 2 of 2 generated (1 without its Fusion sub-queries, asked for again with its "
                              "story kept)" for m in at.markdown)

        at.button(key=f"qb_resume_{qs.id}").click().run()
        assert not at.exception, at.exception
        assert len(server.requests) == 5 and is_fusion_request(server.requests[4])  # no second story
        assert ("Query set ready: 0 ok, 0 flagged, 0 failed; Fusion sub-queries asked for again for 1 story, 1 now "
                "has them.") in [s.value for s in at.success]
        assert not at.warning
        assert not [b for b in at.button if b.key == f"qb_resume_{qs.id}"]
        fixed = db.get_query(store, victim.id)
        store.close()
    assert (fixed.status, fixed.error, fixed.fusion, fixed.text) == ("ok", "", LINES, victim.text)


def test_the_export_download_name_has_no_path_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    AppTest.from_file(QUERY_PAGE, default_timeout=60).run()  # the demo corpus first, as a first start does
    corpus = db.create_corpus(store, "Paths")
    (doc,) = db.add_documents(store, corpus.id, [{"title": "Moon", "text": "The Moon orbits the Earth.",
                                                 "label": "sky"}]).document_ids
    qs = db.create_query_set(store, corpus.id, "runs/2024: v1")
    db.add_queries(store, qs.id, [{"text": "What orbits the Earth? The Moon.", "ground_truth": [doc]}])
    store.close()
    names: dict[str, str] = {}
    original = st.download_button  # the page calls st.download_button (bound to the main area at import)

    def recording(label, data, file_name=None, *args, **kwargs):  # the page's own calls, recorded
        names[kwargs.get("key") or label] = file_name
        return original(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", recording)
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus.id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert names["qb_export"] == "runs_2024_v1.json"
