"""Home's "Results on the demo queries" (AppTest): how to get a run before one exists, then the newest demo run's
means with 95% intervals and where a strategy loses (the hand-made run of tests/services/workflows/
test_home_summary.py, whose docstring gives its values)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from mrag_core.sentence_round_robin import STRATEGY_ID
from services.workflows import home_summary as hs
from tests.services.workflows.test_home_summary import demo_run
from ui.render import md_plain

APP = str(Path(__file__).resolve().parents[2] / "app.py")

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _home() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_home_says_how_to_get_a_run_then_sums_it_up_with_intervals() -> None:
    at = _home()
    assert "Results on the demo queries" in [h.value for h in at.subheader]
    assert any(i.value == hs.how_to_run() for i in at.info)
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    rid = demo_run(store)
    at = _home()
    assert not any(i.value == hs.how_to_run() for i in at.info)
    table = next(df.value for df in at.dataframe if "RSR (n = 6, k = 6)" in df.value.columns).set_index("strategy")
    assert table.loc["Standard", "weighted (n = 6, k = 6)"] == "0.611 [0.556, 0.667]"
    assert table.loc["Sentence round-robin", "RSR (n = 6, k = 6)"] == "0.750 [0.667, 0.833]"
    assert table.loc["MRAG", "RSR (n = 6, k = 3)"] == "0.333 [0.333, 0.333]"
    text = " ".join(m.value for m in at.markdown)
    assert md_plain("MRAG is below Standard on the weighted ratio at 1 aspect, k = 1: 0.33 vs 1.00 (1 query).") in text
    captions = " ".join(c.value for c in at.caption)
    assert f"Run #{rid}" in captions and "cannot tell them apart" in captions
    assert not any(STRATEGY_ID in i.value for i in at.info)  # the run has it: nothing to add


def test_home_says_how_to_add_the_recommended_strategy() -> None:
    _home()
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    rid = demo_run(store, strategies=("standard", "mrag"))
    at = _home()
    assert md_plain(hs.how_to_add_recommended(rid)) in [i.value for i in at.info]
    table = next(df.value for df in at.dataframe if "RSR (n = 6, k = 6)" in df.value.columns)
    assert list(table["strategy"]) == ["Standard", "MRAG"]
