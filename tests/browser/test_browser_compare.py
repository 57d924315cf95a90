"""End to end in a real browser: build the demo index on the Index page, then compare a 5-aspect
demo query on the Compare page and check that the five result lists and the evidence appear."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.browser

STRATEGIES = ["Standard RAG", "MRAG", "Split RAG", "Fusion RAG", "Fusion MRAG"]


def test_build_index_then_compare_five_aspect_query(app_server, browser_page):
    page = browser_page
    page.set_default_timeout(60_000)
    ARTIFACTS.mkdir(exist_ok=True)

    page.goto(f"{app_server}/Index")
    build = page.get_by_role("button", name="Build index")
    build.wait_for(timeout=180_000)  # first start: demo corpus + model load
    build.click()
    page.get_by_text("is ready: 96 documents").wait_for(timeout=300_000)
    page.screenshot(path=str(ARTIFACTS / "browser_index.png"), full_page=True)

    page.goto(f"{app_server}/Compare")
    query_box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text("Query", exact=True))
    query_box.wait_for(timeout=120_000)
    query_box.click()
    page.keyboard.type("[5 aspects]")
    page.keyboard.press("Enter")
    page.get_by_text("Ground truth: 5 document(s)").wait_for()
    page.get_by_role("button", name="Compare", exact=True).click()
    page.get_by_text("Why MRAG returned these documents").wait_for(timeout=120_000)

    for label in STRATEGIES:
        assert page.get_by_text(label, exact=True).first.is_visible(), label
    # five result tables (one per strategy) plus ground truth, metrics, sub-queries, per-doc, aspects
    frames = page.locator('[data-testid="stDataFrame"]')
    assert frames.count() >= 5 + 3
    # per strategy a caption "RSR x.xx · CSR x.xx · weighted x.xx" above its list
    captions = page.get_by_text(re.compile(r"^RSR \d\.\d\d · CSR \d\.\d\d · weighted \d\.\d\d$"))
    assert captions.count() == 5
    page.get_by_text("Why MRAG returned these documents").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "browser_compare.png"), full_page=True)
    assert (ARTIFACTS / "browser_compare.png").stat().st_size > 10_000
