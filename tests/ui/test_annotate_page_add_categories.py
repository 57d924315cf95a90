"""Annotate and Review on a corpus imported without labels (plain text files, a ZIP without folders): the page and
``mrag-studio annotate`` said 'add categories first', but no page could add one, and Find similar crashed
with KeyError: None when 'Apply label to selected' was pressed (its Label box had no option). Categories are now
typed on the page (one per line, ``name: description``); a wrong line adds nothing and says which line.

Also the stop message of a pre-annotation the endpoint ended: 'failed: could not connect (ConnectError).. 0
suggestions stored' (two periods), and 'press Resume' under a button called 'Start pre-annotation'."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.openai_server import FakeOpenAIServer
from ui.render import md_plain

REVIEW_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "2_Annotate_and_Review.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _store() -> db.Store:
    return db.open_store(os.environ["MRAG_DATABASE_URL"])


def _page(corpus_id: int, view: str) -> AppTest:
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    at.radio(key="ar_view").set_value(view).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _unlabelled(store: db.Store, n: int = 3) -> db.CorpusInfo:
    corpus = db.create_corpus(store, "Plain notes")
    db.add_documents(store, corpus.id, [{"title": f"Note {i}", "text": f"The team won match number {i}."}
                                        for i in range(n)])
    return corpus


def _add(at: AppTest, text: str) -> AppTest:
    at.text_area(key=next(t.key for t in at.text_area if t.key.startswith("ar_new_cats_"))).input(text)
    next(b for b in at.button if b.label == "Add categories").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_categories_are_added_on_the_page_and_a_wrong_line_adds_none() -> None:
    store = _store()
    corpus = _unlabelled(store)
    at = _page(corpus.id, "Pre-annotate")
    assert any("no categories yet. Add them below" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "pa_start"]  # nothing to annotate with yet

    _add(at, "sport: football\n\ncooking\nSport : matches")
    (error,) = [e.value for e in at.error]
    assert error == "No category was added: " + md_plain(
        "Line 4: 'Sport' is given twice (or differs from 'sport' only in case or spacing).")
    assert db.list_categories(store, corpus.id) == []
    assert next(t for t in at.text_area if t.key.startswith("ar_new_cats_")).value.endswith("Sport : matches")

    _add(at, "sport: football, matches, goals\ncooking:recipes, food\n<b>x</b> *y*")
    assert [(c.name, c.description) for c in db.list_categories(store, corpus.id)] == [
        ("<b>x</b> *y*", ""), ("cooking", "recipes, food"), ("sport", "football, matches, goals")]
    (success,) = [s.value for s in at.success]
    assert success == f"Added 3 categories to 'Plain notes': sport, cooking, {md_plain('<b>x</b> *y*')}."
    assert md_plain("<b>x</b> *y*") != "<b>x</b> *y*"  # the name is shown escaped
    assert at.button(key="pa_start").label == "Start pre-annotation"  # the corpus can be pre-annotated now
    assert next(t for t in at.text_area if t.key.startswith("ar_new_cats_")).value == ""  # a new, empty field

    _add(at, "COOKING: again")  # one the corpus has already, in another case
    assert at.error[0].value == "No category was added: " + md_plain(
        "Line 1: the corpus has a category 'cooking' already, which differs from 'COOKING' only in case or spacing.")
    assert len(db.list_categories(store, corpus.id)) == 3
    store.close()


def test_find_similar_without_categories_does_not_crash() -> None:
    store = _store()
    corpus = _unlabelled(store)
    at = _page(corpus.id, "Find similar")
    at.toggle(key="fs_on").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert next(b for b in at.button if b.label == "Apply label to selected").disabled  # pressed: KeyError: None
    assert any(c.value == "Add categories above to label these documents." for c in at.caption)
    _add(at, "sport: football, matches")  # the form is on this view too; then a label can be applied
    assert at.radio(key="ar_view").value == "Find similar"
    assert not next(b for b in at.button if b.label == "Apply label to selected").disabled
    store.close()


def test_a_run_stopped_by_an_endpoint_that_is_down_says_so_once_and_offers_resume(monkeypatch) -> None:
    server = FakeOpenAIServer(lambda body: '{"label": "sport", "confidence": 0.9, "reason": "r"}').start()
    server.set_env(monkeypatch)
    server.stop()  # nothing listens on its port any more: 'could not connect (ConnectError).'
    store = _store()
    corpus = _unlabelled(store)
    db.add_categories(store, corpus.id, ["sport", "cooking"])
    at = _page(corpus.id, "Pre-annotate")
    assert at.button(key="pa_start").label == "Start pre-annotation"
    at.number_input(key="pa_batch").set_value(1).run()
    at.button(key="pa_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (warning,) = [w.value for w in at.warning]
    # the cause, the error, what to do (with the URL), then what is left
    assert warning.startswith("Pre-annotation stopped: " + md_plain("endpoint unreachable (connection): LLM request "))
    assert md_plain("could not connect (ConnectError). What to do: check that the server at ") in warning
    assert md_plain(" runs (MRAG_LLM_BASE_URL).") + " 0 suggestions stored, 3 documents left" in warning
    assert ".." not in warning and warning.endswith("press Resume when that is done.")
    assert at.button(key="pa_start").label == "Resume (3 left)"  # the failed one is asked again too
    store.close()
