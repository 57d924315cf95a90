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


def test_a_sessions_first_page_fetches_the_chart_code_and_leaves_no_chart(app_server, browser_page):
    """A page without charts, opened in a new browser profile, still makes the browser fetch Streamlit's Plotly code
    (ui/chart_preload.py), so a chart page opened next draws at once; nothing of the preload stays drawn."""
    from tests.browser.conftest import wait_idle

    context = browser_page.context.browser.new_context(viewport={"width": 1600, "height": 1100})
    try:
        page = context.new_page()
        page.set_default_timeout(180_000)
        asked: list[str] = []
        page.on("request", lambda request: asked.append(request.url))
        page.goto(f"{app_server}/Query_Builder")
        page.locator("h1", has_text="Query Builder").wait_for()
        wait_idle(page)
        assert any("/PlotlyChart." in url for url in asked), [u for u in asked if u.endswith(".js")][:40]
        assert page.locator('[data-testid="stPlotlyChart"]').count() == 0
    finally:
        context.close()
