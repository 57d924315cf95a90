"""The Corpus Import page's widgets show what the page uses: the chosen corpus survives a rename and an import.
AppTest runs against a fresh store per test (``fresh_env``, tests/ui/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db

ROOT = Path(__file__).resolve().parents[2]
IMPORT_PAGE = str(ROOT / "pages" / "1_Corpus_Import.py")

pytestmark = pytest.mark.usefixtures("fresh_env")


def _store() -> db.Store:
    """The store the page under test uses (``MRAG_DATABASE_URL``, set by ``fresh_env``)."""
    return db.open_store(os.environ["MRAG_DATABASE_URL"])


def _page() -> AppTest:
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    _no_exceptions(at)
    return at


def _no_exceptions(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _upload(at: AppTest, name: str | None, data: bytes = b"") -> AppTest:
    """Upload one table file (``name`` None: remove the upload) and run the page."""
    at.file_uploader(key="imp_upload_table").set_value(None if name is None else (name, data, "text/csv")).run()
    _no_exceptions(at)
    return at


def _csv(*texts: str) -> bytes:
    return ("title,text\n" + "".join(f"T{i},{t}\n" for i, t in enumerate(texts))).encode()


def _target_corpus(store: db.Store) -> db.CorpusInfo:
    """A second corpus, listed after the demo corpus (the box's first option)."""
    target = db.create_corpus(store, "Target")
    db.add_documents(store, target.id, [{"title": "old", "text": "A document that was there before."}])
    return db.get_corpus(store, target.id)


# --------------------------------------------------------------------------- 1. the chosen corpus stays chosen


def _manage_open(at: AppTest) -> AppTest:
    at.session_state["cm_open"] = True
    at.run()
    _no_exceptions(at)
    return at


def _shown(at: AppTest, key: str) -> str:
    """The text a select box shows."""
    box = at.selectbox(key=key)
    return box.options[box.index]


def _browser_sends(at: AppTest, key: str, text: str) -> AppTest:
    """Run the page with select box ``key`` sending back ``text``, as the browser does: it keeps the text it showed
    (in Chromium, after a rename the box still showed "Target (1 docs)" and sent it with the next interaction),
    where AppTest by itself sends the stored option, which Streamlit finds again whatever its text now is."""
    box = at.selectbox(key=key)
    if text not in box.options:
        box.options.append(text)  # the browser's list may be older than the page's
    box.set_value(text).run()
    _no_exceptions(at)
    return at


def test_manage_corpora_box_keeps_its_corpus_when_its_name_or_count_changes() -> None:
    """The QA case: after a rename the "Corpus to change" box switched to another corpus (its text changed)."""
    at = _manage_open(_page())
    store = _store()
    target = _target_corpus(store)
    at.run()
    at.selectbox(key="cm_corpus").set_value(target.id).run()
    assert _shown(at, "cm_corpus") == "Target (1 docs)"
    # renamed here; the browser still holds the old text and sends it with the next interaction
    at.text_input(key=f"cm_name_{target.id}").set_value("Target again")
    at.button(key=f"FormSubmitter:cm_edit_{target.id}-Save name and description").click().run()
    assert db.get_corpus(store, target.id).name == "Target again"
    _browser_sends(at, "cm_corpus", "Target (1 docs)")
    assert at.selectbox(key="cm_corpus").value == target.id
    assert _shown(at, "cm_corpus") == "Target again (1 docs)"
    # renamed elsewhere (another tab, the command line): still this corpus, and the form shows its new name (a
    # field keeping the old one would rename it back on the next save)
    db.rename_corpus(store, target.id, "Renamed target")
    _browser_sends(at, "cm_corpus", "Target again (1 docs)")
    assert at.selectbox(key="cm_corpus").value == target.id
    assert at.text_input(key=f"cm_name_{target.id}").value == "Renamed target"
    # documents imported into it on this page: its "(N docs)" changes after the box was drawn
    _upload(at, "more.csv", _csv("One more text about the harbour."))
    at.radio(key="imp_target").set_value("An existing corpus").run()
    at.selectbox(key="imp_existing").set_value(next(c for c in db.list_corpora(store) if c.id == target.id)).run()
    at.button(key="imp_go").click().run()
    _no_exceptions(at)
    assert db.get_corpus(store, target.id).n_documents == 2
    _browser_sends(at, "cm_corpus", "Renamed target (1 docs)")
    assert at.selectbox(key="cm_corpus").value == target.id
    assert _shown(at, "cm_corpus") == "Renamed target (2 docs)"
