"""Navigation in a real browser on a server that has not run its entry point yet: a link straight to a
page (a bookmark opened after a restart) runs under Streamlit's ``pages/``-folder mode, and the page
itself must declare the app's navigation so the sidebar reads "Home", not "app"."""

from __future__ import annotations

import pytest

from ui.page_list import PAGES, page_title

pytestmark = pytest.mark.browser


def _sidebar_links(page) -> list[str]:
    links = page.locator('[data-testid="stSidebarNav"] a')
    links.first.wait_for()
    return [t.strip() for t in links.all_inner_texts()]


def test_deep_link_before_the_entry_point_shows_the_declared_navigation(app_server, browser_page):
    page = browser_page
    page.set_default_timeout(180_000)  # first start: the demo corpus is loaded by the page itself
    page.goto(f"{app_server}/Corpus_Import")  # the first request this server ever serves
    page.locator("h1", has_text="Corpus import").wait_for()
    expected = ["Home", *(page_title(path) for path, _ in PAGES)]
    assert _sidebar_links(page) == expected
    assert page.title() == "Corpus Import · MRAG Studio"
    # the first click on the page takes effect (it is not lost to the change of navigation mode)
    page.get_by_text("MRAG benchmark legal / accident layout").click()
    page.get_by_text("Where is the layout?").wait_for(timeout=30_000)
    assert page.locator('[data-testid="stException"]').count() == 0

    page.get_by_role("link", name="Home", exact=True).click()  # the declared Home, not the bare entry script
    page.get_by_text("Start here").wait_for()
    assert page.title() == "MRAG Studio"

    page.goto(f"{app_server}/Query_Builder")
    page.locator("h1", has_text="Query Builder").wait_for()
    assert _sidebar_links(page) == expected
    assert page.title() == "Query Builder · MRAG Studio"
