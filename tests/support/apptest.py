"""AppTest steps shared by the page tests."""

from __future__ import annotations

import os

from streamlit.testing.v1 import AppTest

import db


def page_store() -> db.Store:
    """The store the page under test uses (``MRAG_DATABASE_URL``, set by the ``fresh_env`` fixture)."""
    return db.open_store(os.environ["MRAG_DATABASE_URL"])


def no_exceptions(at: AppTest) -> None:
    """Fail with the page's exceptions, if it raised any."""
    assert not at.exception, [e.value for e in at.exception]


def import_page(path: str) -> AppTest:
    """The Corpus Import page (``path``) after its first run (which loads the demo corpus), without exceptions."""
    at = AppTest.from_file(path, default_timeout=60).run()
    no_exceptions(at)
    return at


def confirm_and_click(at: AppTest, sure_key: str, button_key: str) -> str:
    """A guarded action: button ``button_key`` is disabled until checkbox ``sure_key`` is ticked; tick it, check the
    button is enabled, click it. Returns the checkbox's label (what the page said would happen)."""
    assert at.button(key=button_key).disabled, f"{button_key} is enabled before {sure_key} is ticked"
    sure = at.checkbox(key=sure_key)
    label = sure.label
    sure.check().run()
    assert not at.button(key=button_key).disabled
    at.button(key=button_key).click().run()
    return label
