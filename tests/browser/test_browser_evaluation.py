"""End to end in a real browser: run the demo query set through Standard, MRAG, Split, Fusion and the recommended
strategy (sentence round-robin), then a second run (MRAG with the decay vote), see the run's figures, compare the
two runs with paired significance tests, restart the app and find both runs listed again."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, wait_idle

pytestmark = pytest.mark.browser

DONE = re.compile(r"^Run #(\d+) done: (\d+) results stored\.$")


def _pick(page, label: str, option: str | re.Pattern) -> None:
    """Choose ``option`` in the multiselect or selectbox labelled ``label``."""
    widget = page.locator('[data-testid="stMultiSelect"], [data-testid="stSelectbox"]').filter(
        has=page.get_by_text(label, exact=True))
    widget.locator("input").first.click()
    page.get_by_role("option", name=option, exact=isinstance(option, str)).first.click()
    page.keyboard.press("Escape")
    wait_idle(page)


def _run(page, run_id: int) -> int:
    """Start the run the form describes; wait for run ``run_id`` to finish; its number of results."""
    page.get_by_role("button", name="Run evaluation").click()
    done = page.get_by_text(re.compile(rf"^Run #{run_id} done: \d+ results stored\.$"))
    done.wait_for(timeout=300_000)
    return int(DONE.match(done.inner_text()).group(2))


def test_runs_figures_comparison_and_restart(demo_app_instance, browser_page):
    """On the demo with its index built (a copy of the session's demo index: a run that builds its own index is
    tested in tests/services/workflows and tests/ui)."""
    app_instance = demo_app_instance
    page = browser_page
    page.set_default_timeout(120_000)
    ARTIFACTS.mkdir(exist_ok=True)

    page.goto(f"{app_instance.url}/Evaluation_Runs")
    page.get_by_role("button", name="Run evaluation").wait_for(timeout=180_000)  # first start loads the demo
    for name in ("split", "fusion", "sentence-round-robin (recommended)"):
        _pick(page, "Strategies", name)
    first, second = 1, 2  # a fresh database
    assert _run(page, first) == 24 * 5  # 24 demo queries x standard, mrag, split, fusion, sentence-round-robin
    # the run's results at once, under the message: its table and its chart at the largest aspect count (6), not
    # at 1 aspect where every line is 1.0
    new_run = page.get_by_role("tabpanel", name="New run")
    new_run.get_by_text(f"Results of run #{first}").wait_for()
    new_run.locator('[data-testid="stDataFrame"]').first.wait_for()
    new_run.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
    new_run.locator('[data-testid="stPlotlyChart"]').get_by_text("6-aspect queries (n = 4)").first.wait_for()

    _pick(page, "MRAG variant", "decay")
    page.get_by_role("button", name="Run evaluation").wait_for()
    page.wait_for_timeout(500)
    assert _run(page, second) == 24 * 5  # the same strategies, with mrag-decay for mrag

    # the run's figures: success ratio vs k, the per-query histogram, improvement over Standard
    page.get_by_role("tab", name="Runs", exact=True).click()
    page.get_by_text("Success ratio vs k").wait_for()
    _pick(page, "Run", re.compile(rf"^#{first} "))
    page.get_by_text("Relative improvement over Standard RAG").wait_for()
    page.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
    assert page.locator('[data-testid="stPlotlyChart"]').count() >= 3
    assert page.get_by_role("button", name="Download chart (PNG)").first.is_visible()
    page.screenshot(path=str(ARTIFACTS / "browser_eval_run.png"), full_page=True)

    # compare MRAG of the first run with MRAG-decay of the second, with paired tests
    page.get_by_role("tab", name="Compare runs").click()
    label = "Runs and strategies to compare (the first is the reference)"
    box = page.locator('[data-testid="stMultiSelect"]').filter(has=page.get_by_text(label))
    box.wait_for()
    box.get_by_role("button", name=re.compile("clear", re.I)).first.click()
    wait_idle(page)
    _pick(page, label, re.compile(rf"^#{first} mrag ·"))
    _pick(page, label, re.compile(rf"^#{second} mrag-decay ·"))
    _pick(page, label, re.compile(rf"^#{first} sentence-round-robin ·"))
    page.get_by_text("Paired significance against the reference").wait_for()
    page.get_by_text("Per-query drill-down").wait_for()
    assert page.locator(".stException").count() == 0
    page.screenshot(path=str(ARTIFACTS / "browser_eval_compare.png"), full_page=True)

    # restart the app on the same database: both runs are still there
    app_instance.stop()
    url = app_instance.start()
    page.goto(f"{url}/Evaluation_Runs")
    page.get_by_role("tab", name="Runs", exact=True).click()
    run_box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text("Run", exact=True))
    run_box.wait_for()
    run_box.locator("input").first.click()
    options = page.get_by_role("option")
    texts = [options.nth(i).inner_text() for i in range(options.count())]
    assert any(t.startswith(f"#{first} ") and "done" in t for t in texts), texts
    assert any(t.startswith(f"#{second} ") and "done" in t for t in texts), texts
