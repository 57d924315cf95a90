"""Evaluation Runs right after "Run evaluation" (AppTest, the demo with its index): the page shows the run's
results at once (its accuracy table and its success-against-k chart at its largest aspect count), not just
"Run #N done"; the Runs tab opens the run at its largest aspect count too (it opened at 1 aspect, where every
line is 1.0), keeps the user's aspect count on reruns, and moves to the largest again for the next run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402
from services.workflows import (
    eval_costs,  # noqa: E402
    eval_results,  # noqa: E402
)
from services.workflows import run_intervals as ri  # noqa: E402

EVAL_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "9_Evaluation_Runs.py")

pytestmark = pytest.mark.usefixtures("demo_indexed")  # tests/ui/conftest.py: the run does not build an index


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def chart_titles(at: AppTest) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def test_a_finished_run_shows_its_results_at_once_at_the_largest_aspect_count() -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.list_corpora(store)[0]
    (demo_set,) = db.list_query_sets(store, corpus.id)
    by_aspects: dict[int, int] = {}
    for q in db.list_queries(store, demo_set.id):
        by_aspects[q.n_aspects] = by_aspects.get(q.n_aspects, 0) + 1
    most = max(by_aspects)
    assert most == 6 and min(by_aspects) == 1  # the demo's 24 queries: 1 to 6 aspects

    at = ok(AppTest.from_file(EVAL_PAGE, default_timeout=180).run())
    at.number_input(key="ev_kmax").set_value(8)
    ok(at.button(key="ev_start").click().run())
    (run,) = db.list_eval_runs(store, corpus_id=corpus.id)
    assert [s.value for s in at.success] == [f"Run #{run.id} done: 48 results stored."]
    assert any(m.value.startswith(f"**Results of run #{run.id}**") and f"its {most}-aspect queries." in m.value
               for m in at.markdown), [m.value for m in at.markdown]
    # the accuracy table as the workflow computes it, drawn under the message (the Runs tab draws it too)
    metrics = eval_results.load_run_metrics(store, run.id)
    expected = ri.with_mean_intervals(eval_costs.without_unused_cost(eval_costs.accuracy_and_cost(metrics)), metrics)
    tables = [d.value.reset_index(drop=True) for d in at.dataframe if "search_s" in d.value.columns]
    assert len(tables) == 2 and all(t.equals(expected.reset_index(drop=True)) for t in tables)
    assert sorted(tables[0]["strategy"]) == ["mrag", "standard"]
    # the chart right under it and the Runs tab's chart: the 6-aspect queries, not the 1-aspect ones
    title = f"{most}-aspect queries (n = {by_aspects[most]})"
    assert chart_titles(at)[:2] == [title, title]
    assert at.selectbox(key="ev_view_run").value == run.id and at.selectbox(key="ev_view_n").value == most

    # the user's aspect count stays on reruns; the next run is shown at its largest again
    at.selectbox(key="ev_view_n").set_value(2)
    ok(at.run())
    assert at.selectbox(key="ev_view_n").value == 2 and chart_titles(at)[0] == f"2-aspect queries (n = {by_aspects[2]})"
    ok(at.button(key="ev_start").click().run())
    second = max(r.id for r in db.list_eval_runs(store, corpus_id=corpus.id))
    assert [s.value for s in at.success] == [f"Run #{second} done: 48 results stored."]
    assert at.selectbox(key="ev_view_run").value == second and at.selectbox(key="ev_view_n").value == most
    assert chart_titles(at)[:2] == [title, title]
    store.close()
