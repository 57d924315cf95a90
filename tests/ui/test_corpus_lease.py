"""Manage corpora: a corpus another process pre-annotates (it holds the corpus' lease) cannot be deleted."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update
from streamlit.testing.v1 import AppTest

import db
from db.models import AppMarker, utcnow
from mrag_core.workflows.annotation import preannotation_lease

IMPORT_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Corpus_Import.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def test_a_corpus_another_process_preannotates_cannot_be_deleted() -> None:
    AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()  # loads the demo corpus
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    news = db.create_corpus(store, "News")
    db.add_documents(store, news.id, [{"text": "a goal", "label": "sport"}])
    lease = preannotation_lease(news.id)
    db.take_lease(store, lease, "gpu-box pid 4242 #0badc0de", "Pre-annotation of corpus", news.id)
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60)
    at.session_state["cm_open"] = True
    at.run()
    at.selectbox(key="cm_corpus").set_value(news.id).run()
    assert not at.exception
    assert any("cannot be deleted while it is being pre\\-annotated \\(gpu\\-box pid 4242, started " in i.value
               for i in at.info), [
        i.value for i in at.info]
    assert at.checkbox(key=f"cm_delete_sure_{news.id}").disabled and at.button(key=f"cm_delete_{news.id}").disabled
    with store.session() as session:  # that process died: its lease expires
        session.execute(update(AppMarker).where(AppMarker.name == lease)
                        .values(updated_at=utcnow() - timedelta(seconds=db.LIVE_WINDOW_S + 1)))
    at.run()
    assert not at.checkbox(key=f"cm_delete_sure_{news.id}").disabled
    store.close()
