"""The Query Builder in a real browser: after Generate, the Review & export tab's set box shows the new set (it
showed the old one while the page below showed the new one, and picking the new one did nothing: an edit or a
delete there went to another set than the box named); picking another set shows that set."""

from __future__ import annotations

import pytest

from tests.browser.conftest import wait_idle

expect = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed").expect

pytestmark = pytest.mark.browser


def set_box(page):  # noqa: ANN001, ANN201
    return page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text("Query set", exact=True))


def test_generated_set_is_the_one_the_review_box_shows(app_instance, browser_page):
    page = browser_page
    page.set_default_timeout(120_000)
    page.goto(f"{app_instance.url}/Query_Builder")
    page.get_by_role("tab", name="Review & export").click()
    set_box(page).wait_for()
    wait_idle(page)
    assert set_box(page).locator("input").input_value().startswith("Demo queries (24 queries")

    page.get_by_role("tab", name="Generate").click()
    generate = page.get_by_role("tabpanel", name="Generate")
    generate.get_by_label("Name of the new query set").fill("Walk set")
    generate.get_by_label("Name of the new query set").press("Enter")
    wait_idle(page)
    generate.get_by_role("button", name="Generate").click()
    page.get_by_text("Query set ready:").wait_for(timeout=300_000)
    wait_idle(page)

    page.get_by_role("tab", name="Review & export").click()
    review = page.get_by_role("tabpanel", name="Review & export")
    assert set_box(page).locator("input").input_value().startswith("Walk set (")
    review.get_by_text("Written by the offline composer (no LLM).").wait_for()

    # another set picked: the page follows the box
    set_box(page).locator("input").click()
    page.get_by_role("option", name="Demo queries (24 queries, manual)").click()
    expect(review.get_by_text("Written by the offline composer (no LLM).")).to_have_count(0)
    wait_idle(page)
    assert set_box(page).locator("input").input_value().startswith("Demo queries (24 queries")
    # and back to the new set
    set_box(page).locator("input").click()
    page.get_by_role("option", name="Walk set", exact=False).click()
    wait_idle(page)
    assert set_box(page).locator("input").input_value().startswith("Walk set (")
    review.get_by_text("Written by the offline composer (no LLM).").wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
