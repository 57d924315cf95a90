"""The demo path in a real browser: Home says how to get a run on the demo queries; after an evaluation run on them
(the services function, on the app's own database), Home shows Standard vs MRAG (vs the recommended strategy when
the run has it) with 95% intervals and where one loses, and the run's comparison shows the intervals too."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, wait_idle

pytestmark = pytest.mark.browser


def _evaluate_demo(folder) -> tuple[int, list[str]]:
    """An evaluation run of the demo queries (k = 1..32) in the app's database; its id and strategies."""
    import db
    from mrag_core.models.loader import load_model
    from mrag_core.sentence_round_robin import STRATEGY_ID
    from mrag_core.settings import RetrievalSettings
    from services.demo.store import ensure_demo_corpus
    from services.workflows import evaluation_runs as er

    strategies = ["standard", "mrag", STRATEGY_ID]
    store = db.open_store(f"sqlite:///{folder / 't.db'}")
    try:
        demo = ensure_demo_corpus(store)
        rid = er.run_evaluation(store, corpus_id=demo.corpus_id, query_set_id=demo.query_set_id,
                                settings=RetrievalSettings(strategies=tuple(strategies)),
                                lm=load_model("minilm", device="cpu"))
        assert db.get_eval_run(store, rid).status == "done"
    finally:
        store.close()
    return rid, strategies


def test_home_sums_up_the_demo_run_with_intervals(demo_app_instance, browser_page):
    page = browser_page
    page.set_default_timeout(120_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(demo_app_instance.url)
    page.get_by_text("Results on the demo queries").wait_for(timeout=180_000)
    wait_idle(page)
    assert page.get_by_text(re.compile(r"^No evaluation run on the demo queries yet")).is_visible()

    rid, strategies = _evaluate_demo(demo_app_instance.folder)
    page.reload()
    page.get_by_text("Results on the demo queries").wait_for(timeout=180_000)
    wait_idle(page)
    page.get_by_text(re.compile(rf"^Run #{rid} \(minilm, layer \d+\): Standard, MRAG")).wait_for()
    assert not page.get_by_text(re.compile(r"^No evaluation run on the demo queries yet")).count()
    table = page.locator('[data-testid="stDataFrame"]', has=page.locator("th", has_text="RSR (n = 6, k = 6)"))
    table.wait_for()  # the grid draws after the script run ends
    assert table.count() == 1
    headers = table.locator("th").all_inner_texts()
    assert {"weighted (n = 6, k = 6)", "RSR (n = 6, k = 6)", "weighted (n = 6, k = 16)",
            "RSR (n = 6, k = 16)"} <= {h.strip() for h in headers}
    # the grid's cells: a mean and its interval, "0.xxx [0.xxx, 0.xxx]", for each strategy and reading
    cells = table.locator("td").all_inner_texts()
    pattern = re.compile(r"^\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]$")
    assert sum(bool(pattern.match(c.strip())) for c in cells) == 4 * len(strategies), cells
    assert page.get_by_text(re.compile(r"^MRAG vs Standard, all 24 queries at k = each query's aspect count: "
                                       r"weighted ratio \d\.\d{3} vs \d\.\d{3}, difference ")).is_visible()
    # the recommended strategy against Standard and against MRAG, each with its interval and what it tells
    for other in ("Standard", "MRAG"):
        page.get_by_text(re.compile(rf"^Sentence round-robin vs {other}, all 24 queries at k = each "
                                    r"query's aspect count: weighted ratio \d\.\d{3} vs \d\.\d{3}, "
                                    r"difference ")).wait_for()
    assert page.get_by_text(re.compile(rf"^Run #{rid} has no sentence-round-robin")).count() == 0
    page.get_by_text("Results on the demo queries").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "browser_home_summary.png"), full_page=True)

    # the same run on Evaluation Runs: intervals next to the means and the paired tests
    page.goto(f"{demo_app_instance.url}/Evaluation_Runs")
    page.get_by_role("tab", name="Compare runs").wait_for(timeout=180_000)
    wait_idle(page)
    page.get_by_role("tab", name="Compare runs").click()
    tests = page.locator('[data-testid="stDataFrame"]', has=page.locator("th", has_text="mean_diff 95% CI"))
    tests.wait_for()
    assert "t_p_holm" in {h.strip() for h in tests.locator("th").all_inner_texts()}
    page.get_by_role("button", name="Comparison with intervals (CSV)").wait_for()
    tests.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "browser_eval_compare_intervals.png"), full_page=True)
