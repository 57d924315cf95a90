"""End to end in a real browser: build the demo index on the Index page, then compare a 5-aspect
demo query on the Compare page and check that the preselected lists (Standard, MRAG and the recommended strategy),
MRAG's per-head evidence and the recommended strategy's per-sentence evidence appear."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, wait_idle

pytestmark = pytest.mark.browser

STRATEGIES = ["Standard RAG", "MRAG", "Sentence round-robin (Standard + MRAG per sentence)"]  # preselected


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

    page.get_by_role("button", name="Query it on Compare").click()  # the Index page's next step
    page.wait_for_url(re.compile(r"/Compare$"))
    query_box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text("Query", exact=True))
    query_box.wait_for(timeout=120_000)
    # let the first (cold) Compare run finish: once, in a fresh clone, the 5-aspect query typed while it
    # was still running never got selected
    wait_idle(page)
    query_box.click()
    page.keyboard.type("[5 aspects]")
    page.get_by_role("option", name=re.compile(r"^\[5 aspects\]")).first.click()
    page.get_by_text("Ground truth: 5 document(s)").wait_for()
    page.get_by_role("button", name="Compare", exact=True).click()
    page.get_by_text("Why MRAG returned these documents").wait_for(timeout=120_000)

    for label in STRATEGIES:
        assert page.get_by_text(label, exact=True).first.is_visible(), label
    why = page.get_by_text(re.compile(r"^Why the recommended strategy, Sentence round-robin"))
    why.scroll_into_view_if_needed()
    assert why.is_visible()
    # three result tables (one per strategy) plus ground truth, metrics, per-doc, aspects, sentences, found-by
    frames = page.locator('[data-testid="stDataFrame"]')
    assert frames.count() >= 3 + 6
    # per strategy a caption "RSR x.xx · CSR x.xx · weighted x.xx" above its list
    captions = page.get_by_text(re.compile(r"^RSR \d\.\d\d · CSR \d\.\d\d · weighted \d\.\d\d$"))
    assert captions.count() == 3
    page.get_by_text("Why MRAG returned these documents").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "browser_compare.png"), full_page=True)
    assert (ARTIFACTS / "browser_compare.png").stat().st_size > 10_000


def test_attention_heatmaps_and_maps_with_selection(demo_app_instance, browser_page):
    """On a server of its own with the demo index built (not the test above's: on two test workers the two tests
    can run apart, and this one found no index): the Attention page draws both heatmaps for a demo document; the
    Maps page draws the small multiples, places a demo query, and a box selection on a map filters the document
    table."""
    page = browser_page
    page.set_default_timeout(120_000)
    app_server = demo_app_instance.url

    page.goto(f"{app_server}/Attention")
    page.get_by_text(re.compile(r"^Layer \d \(the \w+ of 6, counted from 0\) · 12 heads · \d+ tokens$")).wait_for()
    charts = page.locator('[data-testid="stPlotlyChart"]')
    charts.nth(1).locator(".main-svg").first.wait_for()  # the plotly bundle loads lazily
    assert charts.count() == 2
    assert page.locator(".stException").count() == 0
    page.screenshot(path=str(ARTIFACTS / "browser_attention.png"), full_page=True)

    page.goto(f"{app_server}/Maps")
    page.get_by_text("Select points on the maps (box or lasso) to filter this table.").wait_for()
    page.get_by_text("From a query set").click()
    page.get_by_text(re.compile(r"at k=\d+: RSR \d\.\d\d · CSR \d\.\d\d")).wait_for()
    chart = page.locator('[data-testid="stPlotlyChart"]').first
    picked = page.get_by_text(re.compile(r"^\d+ selected document\(s\)"))
    for attempt in range(3):  # a rerun that redraws the chart (the one that placed the query, or one mid-drag)
        try:                    # replaces its element ("not attached to the DOM") or loses the selection: again
            wait_idle(page)
            chart.locator(".main-svg").first.wait_for()
            chart.scroll_into_view_if_needed()
            page.wait_for_timeout(1000)
            _box_select(page, chart)
            picked.wait_for(timeout=30_000)
            break
        except Exception:  # noqa: BLE001 - playwright's TimeoutError or Error
            page.screenshot(path=str(ARTIFACTS / f"browser_maps_attempt{attempt}.png"))
            page.wait_for_timeout(1000)
    picked.wait_for(timeout=1000)
    assert 0 < int(picked.inner_text().split()[0]) < 96
    assert page.locator(".stException").count() == 0
    page.screenshot(path=str(ARTIFACTS / "browser_maps.png"), full_page=True)


def _box_select(page, chart) -> None:
    """Pick plotly's box-select tool (the modebar shows on hover) and drag across the first subplot."""
    chart.hover()
    chart.locator('.modebar-btn[data-val="select"]').first.click()
    plot = chart.locator(".nsewdrag").first
    plot.scroll_into_view_if_needed()
    page.mouse.wheel(0, -150)  # clear of Streamlit's sticky header
    page.wait_for_timeout(500)
    box = plot.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + 0.05 * box["width"], box["y"] + 0.05 * box["height"])
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + box["height"] * 0.7, steps=12)
    page.mouse.up()
