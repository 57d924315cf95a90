"""Annotate & Review: a pre-annotation the endpoint stops (every request would fail: a wrong key) says it stopped,
why, and how many documents are left to resume; it said 'Pre-annotation finished'."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.openai_server import Reply, fake_openai
from ui.render import md_plain

__all__ = ["fake_openai"]
REVIEW_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "2_Annotate_and_Review.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_a_run_the_endpoint_stops_says_so_and_leaves_the_rest_to_resume(monkeypatch, fake_openai) -> None:
    down = {"yes": True}

    def respond(body: dict[str, Any]) -> Reply | str:
        if down["yes"]:
            return Reply.error(401, "Incorrect API key provided")
        return '{"label": "sport", "confidence": 0.8, "reason": "a match"}'

    server = fake_openai(respond)
    server.set_env(monkeypatch)
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    c = db.create_corpus(store, "Tiny")
    db.add_categories(store, c.id, [{"name": "sport", "description": "matches"}, {"name": "cooking"}])
    db.add_documents(store, c.id, [{"title": f"D{i}", "text": f"The team played match number {i}."}
                                   for i in range(3)])
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = c.id
    at.run()
    at.radio(key="ar_view").set_value("Pre-annotate").run()
    at.number_input(key="pa_batch").set_value(1).run()
    at.button(key="pa_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.success
    (warning,) = [w.value for w in at.warning]
    assert warning.startswith("Pre-annotation stopped: " + md_plain("API key refused (auth): "))
    assert "HTTP 401" in warning
    assert md_plain("What to do: check MRAG_LLM_API_KEY.") in warning  # the cause's advice
    # the failed document is asked again on resume too: 3 left, as the Resume button and the count above say
    assert warning.endswith("0 suggestions stored, 3 documents left: press Resume when that is done.")
    assert len(server.requests) == 1  # the other two were never sent
    assert not at.button(key="pa_start").disabled  # all 3 to do: the failed one is asked again too
    assert any(m.value.startswith("**3** of 3 documents still need a suggestion") for m in at.markdown)
    assert at.button(key="pa_start").label == "Resume (3 left)"
    first = db.document_ids(store, c.id)[0]
    (caption,) = [m.value for m in at.caption if m.value.startswith("Failed: ")]
    assert caption.startswith("Failed: " + md_plain(f"document 'D0' (id {first}): ")) and "HTTP 401" in caption
    down["yes"] = False
    at.button(key="pa_start").click().run()
    assert at.success and "3 suggestions, 0 failed" in at.success[0].value
    store.close()
