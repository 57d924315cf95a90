"""Annotate and Review: 'Rename, merge or delete a category'. A corpus imported with the labels 'Physics' and
'physics' was refused by pre-annotation ('differ only in case or spacing; rename one') and no page could rename a
category: the page now points at the two, offers the merge when one is renamed to the other's name, and
pre-annotation runs after it. Deleting a category that labels documents says how many and needs a tick (or a
category to move the labels to); counts that changed since they were shown change nothing."""

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


def _store() -> db.Store:
    return db.open_store(os.environ["MRAG_DATABASE_URL"])


def _imported(store: db.Store) -> db.CorpusInfo:
    """Three documents imported with 'Physics', 'physics' and 'Chem*' labels straight through the store."""
    corpus = db.create_corpus(store, "Sci")
    db.add_documents(store, corpus.id, [{"title": "Electrons", "text": "Electrons orbit.", "label": "Physics"},
                                        {"title": "Photons", "text": "Photons travel.", "label": "physics"},
                                        {"title": "Acids", "text": "Acids burn.", "label": "Chem*"}])
    return corpus


def _page(corpus_id: int) -> AppTest:
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    at.radio(key="ar_view").set_value("Pre-annotate").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _widget(widgets: Any, prefix: str) -> Any:
    return next(w for w in widgets if w.key and w.key.startswith(prefix))


def _ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_case_clashing_categories_are_merged_on_the_page_and_pre_annotation_runs(monkeypatch, fake_openai) -> None:
    server = fake_openai(lambda body: Reply.ok('{"label": "Physics", "confidence": 0.9, "reason": "particles"}'))
    server.set_env(monkeypatch)
    store = _store()
    corpus = _imported(store)
    at = _page(corpus.id)
    assert any(w.value.startswith("Categories that differ only in case or spacing: 'Physics' and 'physics'.")
               for w in at.warning)
    at.button(key="pa_start").click().run()  # refused while both exist
    assert any("'Physics' and 'physics' differ only in case or spacing" in e.value for e in _ok(at).error)
    assert not server.requests

    assert _widget(at.selectbox, "ar_cat_pick_").value == "physics"  # the expander opens on the second spelling
    _widget(at.text_input, "ar_cat_new_").input("Physics").run()
    assert not [b for b in _ok(at).button if b.key == "ar_cat_rename"]
    assert any(w.value == md_plain(
        "The corpus has a category 'Physics' already: the two can only be merged. 1 document is labelled 'physics' "
        "(1 by a decision); 1 decision and 0 suggestions name it (older ones included). Merging moves them all to "
        "'Physics' and deletes 'physics'; queries whose ground truth had documents of both are flagged (their "
        "aspects then share one category).") for w in at.warning)
    merge = at.button(key="ar_cat_merge")
    assert merge.label == "Merge 'physics' into 'Physics'"
    merge.click().run()
    (success,) = [s.value for s in _ok(at).success]
    assert success == md_plain("Merged 'physics' into 'Physics': 1 document labelled 'physics' is labelled 'Physics' "
                               "now (1 decision and 0 suggestions moved).")
    assert db.category_counts(store, corpus.id) == {"Chem*": 1, "Physics": 2}
    assert not any("differ only in case" in w.value for w in at.warning)
    assert _widget(at.text_input, "ar_cat_new_").value == ""  # a new, empty field

    at.button(key="pa_start").click().run()
    assert _ok(at).success[0].value.startswith("Pre-annotation finished: 3 suggestions, 0 failed")
    assert len(server.requests) == 3
    store.close()


def test_a_used_category_is_deleted_only_when_ticked_and_a_plain_rename_renames() -> None:
    store = _store()
    corpus = _imported(store)
    at = _page(corpus.id)
    _widget(at.selectbox, "ar_cat_pick_").set_value("Chem*").run()
    assert _ok(at).button(key="ar_cat_delete").disabled
    assert any(c.value.startswith(md_plain("1 document is labelled 'Chem*' (1 by a decision); 1 decision and 0 "
                                           "suggestions name it (older ones included). Deleting it deletes those"))
               for c in at.caption)
    box = _widget(at.checkbox, "ar_cat_confirm_")
    assert box.label == f"Delete its labels: 1 document loses '{md_plain('Chem*')}'"
    box.check().run()
    at.button(key="ar_cat_delete").click().run()
    (success,) = [s.value for s in _ok(at).success]
    assert success == md_plain("Deleted category 'Chem*' with its 1 decision and 0 suggestions: 1 document is "
                               "unlabelled now, 0 fell back to an earlier label.")
    assert db.category_counts(store, corpus.id) == {"Physics": 1, "physics": 1}

    _widget(at.selectbox, "ar_cat_pick_").set_value("Physics").run()
    _widget(at.text_input, "ar_cat_new_").input("Mechanics").run()
    at.button(key="ar_cat_rename").click().run()
    assert [s.value for s in _ok(at).success] == [md_plain("Renamed category 'Physics' to 'Mechanics'.")]
    assert db.category_counts(store, corpus.id) == {"Mechanics": 1, "physics": 1}
    store.close()


def test_labels_moved_on_delete_and_counts_changed_meanwhile_change_nothing() -> None:
    store = _store()
    corpus = _imported(store)
    at = _page(corpus.id)
    _widget(at.selectbox, "ar_cat_pick_").set_value("physics").run()
    _widget(at.selectbox, "ar_cat_move_").set_value("Chem*").run()
    assert not _ok(at).checkbox and not at.button(key="ar_cat_delete").disabled  # the labels are kept: no tick
    photons = db.document_ids(store, corpus.id)[1]
    chem = next(c.id for c in db.list_categories(store, corpus.id) if c.name == "Chem*")
    db.decide_label(store, photons, chem, "someone else", expected_version=db.get_document(store, photons).version)
    at.button(key="ar_cat_delete").click().run()  # the counts shown were read before that decision
    (error,) = [e.value for e in _ok(at).error]
    assert error.startswith("Nothing was changed: ") and "changed since they were counted" in error
    assert len(db.list_categories(store, corpus.id)) == 3
    at.button(key="ar_cat_delete").click().run()  # the page shows the new counts now: the same press works
    assert _ok(at).success[0].value.startswith(md_plain("Merged 'physics' into 'Chem*': 0 documents labelled "
                                                        "'physics' are labelled 'Chem*' now (1 decision"))
    assert db.category_counts(store, corpus.id) == {"Chem*": 2, "Physics": 1}
    store.close()
