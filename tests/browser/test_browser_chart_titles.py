"""The demo path in a real browser, looked at as a presenter sees it: on Compare every chosen strategy's chip is in
view (five chips in half a row left 'Fusio' behind a fade), and no chart's subplot title lies under the toolbar
Plotly shows at a chart's top right while the pointer is over it (Compare's 'importance s_i', the Maps' fourth
head were covered)."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import wait_idle

pytestmark = pytest.mark.browser

# Titles (subplot titles are annotations) whose box meets the toolbar's box, in the chart ``el``.
TITLES_UNDER_TOOLBAR = """(el) => {
  const bar = el.querySelector('.modebar');
  if (!bar) return null;
  const m = bar.getBoundingClientRect();
  const hit = [];
  for (const t of el.querySelectorAll('.annotation-text, .gtitle')) {
    const r = t.getBoundingClientRect();
    if (r.left < m.right && m.left < r.right && r.top < m.bottom && m.top < r.bottom) hit.push(t.textContent);
  }
  return JSON.stringify(hit);
}"""

# Chips of the multiselect ``el`` that its clipping box (the nearest ancestor hiding overflow) does not show whole.
CHIPS_OUT_OF_VIEW = """(el) => {
  const out = [];
  for (const tag of el.querySelectorAll('[data-tag]')) {
    let box = tag.parentElement;
    while (box && box !== el && getComputedStyle(box).overflowX === 'visible') box = box.parentElement;
    const c = box.getBoundingClientRect(), r = tag.getBoundingClientRect();
    if (r.left < c.left - 0.5 || r.right > c.right + 0.5) out.push(tag.textContent);
  }
  return JSON.stringify(out);
}"""


def titles_under_toolbar(page) -> dict[int, list[str]]:
    """Per Plotly chart on the page (by position), the titles the toolbar covers once the pointer is over it."""
    covered = {}
    charts = page.locator('[data-testid="stPlotlyChart"]')
    charts.first.locator(".main-svg").first.wait_for()  # drawn, not only placed
    for i in range(charts.count()):
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        box = chart.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.locator('[data-testid="stPlotlyChart"] .modebar').nth(i).wait_for(state="visible")
        covered[i] = json.loads(chart.evaluate(TITLES_UNDER_TOOLBAR))
    return covered


def test_compare_and_maps_show_every_strategy_and_every_chart_title(demo_app_instance, browser_page):
    """On the demo with its index built (a copy of the session's demo index)."""
    app_server = demo_app_instance.url
    page = browser_page
    page.set_default_timeout(60_000)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{app_server}/Compare")
    page.get_by_role("button", name="Compare", exact=True).wait_for(timeout=180_000)  # first start: model load
    wait_idle(page)
    strategies = page.locator('[data-testid="stMultiSelect"]').filter(has=page.get_by_text("Strategies", exact=True))
    assert strategies.locator('[data-tag]').count() == 3  # preselected: Standard, MRAG, the recommended one
    assert json.loads(strategies.evaluate(CHIPS_OUT_OF_VIEW)) == []
    page.get_by_role("button", name="Compare", exact=True).click()
    page.get_by_text("Why MRAG returned these documents").wait_for(timeout=120_000)
    wait_idle(page)
    covered = titles_under_toolbar(page)
    assert covered == {0: []}  # the evidence chart: heatmap and importance titles both clear

    page.goto(f"{app_server}/Maps")
    page.locator('[data-testid="stPlotlyChart"]').first.wait_for(timeout=120_000)
    wait_idle(page)
    assert titles_under_toolbar(page) == {0: []}  # 13 small maps, the top row's titles clear
    assert page.locator('[data-testid="stException"]').count() == 0
