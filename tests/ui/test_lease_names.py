"""Annotate & Review and Query Builder: work another process holds (mrag-studio annotate / generate beside
the app) is refused naming the corpus or query set by its name (Markdown-escaped: names are data), its id and when it
started; it said "Pre-annotation of corpus 3 is running in another process". Nothing is asked or stored."""

from __future__ import annotations

import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from streamlit.testing.v1 import AppTest

import db
from db.models import AppMarker
from services.workflows import querysets as qw
from services.workflows.annotation import preannotation_lease
from tests.support.openai_server import fake_openai
from ui.render import md_plain

__all__ = ["fake_openai"]
ROOT = Path(__file__).resolve().parents[2]
REVIEW_PAGE = str(ROOT / "pages" / "2_Annotate_and_Review.py")
QUERY_PAGE = str(ROOT / "pages" / "8_Query_Builder.py")
OTHER = "gpu-box pid 4242 #0badc0de"
NAME = "Space *mix* <b>"  # Markdown and HTML in a name must show as typed
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _corpus(store: db.Store) -> db.CorpusInfo:
    c = db.create_corpus(store, NAME)
    db.add_documents(store, c.id, [{"title": f"D{i}", "text": f"Text number {i}.", "label": lab}
                                   for i, lab in enumerate(["moon", "mars", "moon", "mars"])])
    return c


def _hold(store: db.Store, lease: str, kind: str, key: int) -> None:
    """Another process holds ``lease``, taken at 2026-11-24 12:00:05 UTC, heard from just now."""
    db.take_lease(store, lease, OTHER, kind, key)
    with store.session() as session:
        session.execute(update(AppMarker).where(AppMarker.name == lease)
                        .values(created_at=datetime(2026, 11, 24, 12, 0, 5)))


def test_preannotation_held_elsewhere_is_refused_by_name(monkeypatch, fake_openai) -> None:
    def respond(body: dict[str, Any]) -> str:
        return '{"label": "moon", "confidence": 0.8, "reason": "r"}'

    server = fake_openai(respond)
    server.set_env(monkeypatch)  # an LLM annotator: no embedding model to load
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    c = _corpus(store)
    _hold(store, preannotation_lease(c.id), "Pre-annotation of corpus", c.id)
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = c.id
    at.run()
    at.radio(key="ar_view").set_value("Pre-annotate").run()
    at.button(key="pa_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (error,) = [e.value for e in at.error]
    assert error.startswith("Not started: " + md_plain(
        f"Pre-annotation of corpus {NAME!r} (#{c.id}) is already running in another process (gpu-box pid 4242; "
        "started 2026-11-24 12:00:05 UTC, last heard from ")), error
    assert "<b>" not in error and "\\*mix\\*" in error
    assert server.requests == [] and all(db.list_suggestions(store, d) == [] for d in db.document_ids(store, c.id))
    assert "pa_running" not in at.session_state
    store.close()


def test_generation_held_elsewhere_is_refused_by_name() -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    c = _corpus(store)
    cancel = threading.Event()
    cancel.set()  # the set is stored, nothing generated yet: the page offers to resume it
    rep = qw.generate_query_set(store, corpus_id=c.id, name="Mixed *aspects*", aspect_counts=[1], per_count=2,
                                cancel=cancel)
    _hold(store, qw.generation_lease(rep.query_set_id), "Query generation for set", rep.query_set_id)
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = c.id
    at.run()
    at.button(key=f"qb_resume_{rep.query_set_id}").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (error,) = [e.value for e in at.error]
    assert error.startswith(md_plain(
        f"Query generation for set 'Mixed *aspects*' (#{rep.query_set_id}) is already running in another process "
        "(gpu-box pid 4242; started 2026-11-24 12:00:05 UTC, last heard from ")), error
    assert db.get_query_set(store, rep.query_set_id).n_queries == 0
    store.close()
