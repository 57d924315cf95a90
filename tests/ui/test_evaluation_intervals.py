"""Evaluation Runs shows bootstrap 95% intervals next to each mean and each paired difference (AppTest, a hand-made
run of three queries: tests/services/workflows/test_run_intervals.py explains its values)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from services.workflows import run_intervals as ri
from tests.support.hand_run import hand_run

EVAL_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "9_Evaluation_Runs.py")

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


@pytest.fixture
def page() -> tuple[AppTest, int]:
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()  # the demo corpus first, as a first start does
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus_id, rid, _ = hand_run(store)
    at = AppTest.from_file(EVAL_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at, rid


def test_the_runs_accuracy_table_shows_each_means_interval(page) -> None:
    at, _ = page
    cost = next(df.value for df in at.dataframe if "weighted 95% CI" in df.value.columns).set_index("strategy")
    assert cost.loc["standard", "weighted"] == pytest.approx(4 / 9)
    assert cost.loc["standard", "weighted 95% CI"] == "[0.333, 0.500]"
    assert cost.loc["mrag", "weighted 95% CI"] == "[0.500, 1.000]"
    assert cost.loc["standard", "rsr 95% CI"] == "[0.000, 0.500]"
    assert ri.INTERVAL_NOTE in [c.value for c in at.caption]


def test_the_comparison_shows_intervals_next_to_the_means_and_the_holm_tests(page) -> None:
    at, rid = page
    s, m = f"#{rid} standard", f"#{rid} mrag"
    means = next(df.value for df in at.dataframe if list(df.value.index) == ["1", "2", "all"])
    assert list(means.columns) == [s, f"{s} 95% CI", m, f"{m} 95% CI"]
    assert means.loc["2", f"{m} 95% CI"] == "[0.500, 0.833]" and means.loc["2", f"{s} 95% CI"] == "[0.500, 0.500]"
    assert means.loc["1", f"{m} 95% CI"] == ""  # one query: no interval
    tests = next(df.value for df in at.dataframe if "t_p_holm" in df.value.columns).set_index("n_aspects")
    cols = list(tests.columns)
    assert cols.index("mean_diff 95% CI") == cols.index("mean_diff") + 1 and "wilcoxon_p_holm" in cols
    assert tests.loc["all", "mean_diff"] == "+0.333" and tests.loc["all", "mean_diff 95% CI"] == "[0.000, +0.667]"
    assert tests.loc["2", "mean_diff 95% CI"] == "[0.000, +0.333]"
    button = at.get("download_button")
    assert any(b.proto.label == "Comparison with intervals (CSV)" for b in button)


def test_the_difference_intervals_follow_the_chosen_metric(page) -> None:
    at, _ = page
    # rsr at k = aspects: mrag 1, .75, .5 against standard 0, .5, .5: d = 1, .25, 0
    at.selectbox(key="ev_cmp_metric").set_value("rsr").run()
    assert not at.exception
    tests = next(df.value for df in at.dataframe if "t_p_holm" in df.value.columns).set_index("n_aspects")
    assert tests.loc["all", "mean_diff"] == "+0.417" and tests.loc["all", "mean_diff 95% CI"] == "[0.000, +1.000]"
