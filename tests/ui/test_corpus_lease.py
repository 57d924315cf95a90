"""The corpus' pre-annotation lease: a corpus another process pre-annotates cannot be deleted (Manage corpora), and
none of its categories deleted or merged (Annotate and Review) while a run holds it."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update
from streamlit.testing.v1 import AppTest

import db
from db.models import AppMarker, utcnow
from services.workflows.annotation import preannotation_lease
from tests.support.openai_server import fake_openai

IMPORT_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "1_Corpus_Import.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py
__all__ = ["fake_openai"]


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


def test_a_category_of_a_corpus_this_app_preannotates_is_not_deleted(fake_openai) -> None:
    """A real pre-annotation runs in this process (another session's thread) and holds the corpus' lease while
    the endpoint holds its answer: the Annotate and Review page refuses to delete one of the corpus' categories,
    saying why, and the run then ends with every suggestion stored (before, the deletion went through and the run
    aborted with "category N is not a category of the document's corpus")."""
    import json
    import threading

    from services.llm.client import LLMClient
    from services.workflows import annotation as aw
    from tests.support.openai_server import by_content

    review_page = str(Path(__file__).resolve().parents[2] / "pages" / "2_Annotate_and_Review.py")
    asked, answer = threading.Event(), threading.Event()

    def held(prompt: str) -> str:
        asked.set()
        answer.wait(60)
        return json.dumps({"label": "food" if "soup" in prompt else "sport", "confidence": 0.9, "reason": "r"})

    server = fake_openai(by_content(held))
    AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()  # loads the demo corpus
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    news = db.create_corpus(store, "News")
    db.add_documents(store, news.id, [{"text": "a late goal", "label": "sport"}, {"text": "a hot soup"}])
    db.add_categories(store, news.id, ["food"])
    done: list[aw.PreannotateSummary | BaseException] = []

    def run() -> None:
        try:
            done.append(aw.preannotate(store, news.id, aw.LLMAnnotator(LLMClient(server.llm_config(timeout_s=60)))))
        except BaseException as exc:  # noqa: BLE001 - reported below
            done.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        assert asked.wait(60)
        at = AppTest.from_file(review_page, default_timeout=60)
        at.session_state["corpus_id"] = news.id
        at.run()
        at.radio(key="ar_view").set_value("Pre-annotate").run()
        at.selectbox(key="ar_cat_pick_0").set_value("food").run()
        at.button(key="ar_cat_delete").click().run()
        assert not at.exception, [e.value for e in at.exception]
        errors = [e.value.replace("\\", "") for e in at.error]
        assert len(errors) == 1 and errors[0].startswith(
            f"Nothing was changed: Cannot delete category 'food' now: Pre-annotation of corpus 'News' (#{news.id}) "
            "is running in this app, started "), errors
        assert "would abort it. Wait until it ends, or stop it, then try again." in errors[0]
        assert sorted(c.name for c in db.list_categories(store, news.id)) == ["food", "sport"]
    finally:
        answer.set()
        worker.join(60)
    (summary,) = done
    assert isinstance(summary, aw.PreannotateSummary), summary
    assert (summary.ok, summary.failed) == (2, 0)
    at.run()
    at.checkbox(key="ar_cat_confirm_0").check().run()  # the soup is suggested 'food' now
    at.button(key="ar_cat_delete").click().run()  # the run has ended: the deletion goes through
    assert not at.error and sorted(c.name for c in db.list_categories(store, news.id)) == ["sport"]
    store.close()
