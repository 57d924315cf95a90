"""The Compare runs tab of Evaluation Runs after the analyst walk-through (AppTest, a fresh SQLite store).

Found: the significance table starred raw p-values of about 11 tests per item without a word about multiple testing;
the means table did not say at which k its means are read; and Streamlit logged on every rerun that ev_cmp_items
was "created with a default value but also set via the Session State API"."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402
from services.workflows import eval_comparison  # noqa: E402
from tests.support.hand_run import hand_run  # noqa: E402

EVAL_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "9_Evaluation_Runs.py")

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


_runs = hand_run  # (corpus id, run id, the 1-aspect query's id)


def _page(corpus_id: int) -> AppTest:
    at = AppTest.from_file(EVAL_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    return at.run()


def _markdown(at: AppTest, start: str) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith(start)]


@pytest.fixture
def page() -> tuple[AppTest, int]:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    AppTest.from_file(EVAL_PAGE, default_timeout=60).run()  # the demo corpus first, as a first start does
    corpus_id, rid, _ = _runs(store)
    at = _page(corpus_id)
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="ev_cmp_items").value == [(rid, "standard"), (rid, "mrag")]
    return at, rid


def test_the_significance_table_shows_holm_adjusted_p_values_and_says_the_marks_read_them(page) -> None:
    at, rid = page
    assert eval_comparison.HOLM_NOTE in [c.value for c in at.caption]
    assert "Holm-adjusted over the item's own tests" in eval_comparison.HOLM_NOTE
    assert "marks are read from these adjusted" in eval_comparison.HOLM_NOTE
    tests = next(df.value for df in at.dataframe if "t_sig" in df.value.columns).set_index("n_aspects")
    # Wilcoxon of mrag - standard: 1 aspect one query (no test); 2 aspects +1/3, 0 -> p = 1; all +2/3, +1/3, 0 ->
    # p = 0.5 (exact: ranks 2, 1 positive, W- = 0, 2 / 2^2). Family of 2 (the NaN row is not counted):
    # sorted 0.5 x 2 = 1.0, 1 x 1 = 1.0.
    assert tests.loc["2", "wilcoxon_p"] == pytest.approx(1.0) and tests.loc["all", "wilcoxon_p"] == pytest.approx(0.5)
    assert tests["wilcoxon_p_holm"].drop("1").tolist() == pytest.approx([1.0, 1.0])
    assert tests["wilcoxon_p_holm"].isna().tolist() == [True, False, False]
    assert tests["wilcoxon_sig"].tolist() == ["", "n.s.", "n.s."]


def test_the_means_table_says_at_which_k_it_reads_the_means(page) -> None:
    at, _ = page
    assert _markdown(at, "**Mean weighted per aspect count") == [
        "**Mean weighted per aspect count, at k = each query's number of aspects**"]
    at.number_input(key="ev_cmp_k").set_value(1).run()
    assert _markdown(at, "**Mean weighted per aspect count") == ["**Mean weighted per aspect count, at k = 1**"]
    means = next(df.value for df in at.dataframe if list(df.value.index) == ["1", "2", "all"])
    # at k = 1, 2-aspect queries: standard (0.5 + 0.5) / 2; mrag q2 (2·0.5 + 1) / 3 = 2/3, q3 0.5: 7/12
    assert means.loc["2", [c for c in means.columns if not c.endswith("95% CI")]].tolist() == pytest.approx(
        [0.5, 7 / 12])
    at.number_input(key="ev_cmp_k").set_value(5).run()  # the run scored k = 1..2 only
    assert _markdown(at, "**Mean weighted per aspect count") == [
        "**Mean weighted per aspect count, at k = 2 (5 asked; 2 is the largest k every run scored)**"]


def test_the_compared_items_are_set_one_way_only(page, monkeypatch) -> None:
    """Streamlit warns (once a process) when a widget has a default value and its key was set by the script."""
    from streamlit.elements.lib import policies

    at, rid = page
    logged: list[Any] = []
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    monkeypatch.setattr(policies._LOGGER, "warning", lambda msg, *args, **kw: logged.append(msg % args))
    at.multiselect(key="ev_cmp_items").set_value([(rid, "mrag"), (rid, "standard")]).run()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="ev_cmp_items").value == [(rid, "mrag"), (rid, "standard")]  # kept across reruns
    assert [m for m in logged if "ev_cmp_items" in m] == []
