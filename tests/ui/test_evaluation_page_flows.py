"""AppTest flows of the Evaluation Runs page: stopping and resuming runs and layer sweeps, settings kept across
pages, the run comparison views and the drill-down into Compare (on the run's own index)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402
from mrag_core.settings import RetrievalSettings  # noqa: E402
from services.workflows import (
    eval_results,  # noqa: E402
    eval_sweeps,  # noqa: E402
)
from services.workflows import evaluation_runs as er  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EVAL_PAGE = str(ROOT / "pages" / "9_Evaluation_Runs.py")
TIMEOUT = 120

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _store() -> db.Store:
    return db.open_store(os.environ["MRAG_DATABASE_URL"])


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def eval_page() -> AppTest:
    """The Evaluation Runs page alone; its first run loads the demo corpus."""
    return ok(AppTest.from_file(EVAL_PAGE, default_timeout=TIMEOUT).run())


def app() -> AppTest:
    """The whole app (``app.py``'s navigation), to switch pages as the sidebar does; its first run (Home) loads
    the demo corpus."""
    return ok(AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run())


def demo(store: db.Store) -> tuple[int, int]:
    """(demo corpus id, demo query set id)."""
    corpus = db.list_corpora(store)[0]
    return corpus.id, db.list_query_sets(store, corpus.id)[0].id


def markdowns(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown]


@pytest.mark.usefixtures("demo_indexed")  # the index exists: the run does not build one
def test_a_stopped_run_is_listed_as_stopped_not_running() -> None:
    """Stop reruns the page while the run still works in the previous script run (its next progress report is
    where Streamlit stops it): the rerun listed '#N … running - 0 results saved'. The page now stops the session's
    run through its cancel event and waits until the run has stored that it stopped."""
    at = eval_page()
    store = _store()
    corpus_id, qs_id = demo(store)
    cancel, reached = threading.Event(), threading.Event()

    def slow_batches(stage: str, done: int, total: int) -> None:
        if stage == "evaluation":
            reached.set()
            time.sleep(1.0)  # a batch that takes its time

    at.session_state["_ev_cancel"] = cancel  # what the page's Run evaluation kept for this session
    worker = threading.Thread(target=er.run_evaluation, args=(store,), kwargs=dict(
        corpus_id=corpus_id, query_set_id=qs_id, settings=RetrievalSettings(strategies=("standard", "mrag"), k_max=8),
        batch_size=4, progress=slow_batches, cancel=cancel))
    worker.start()
    assert reached.wait(120)
    ok(at.run())  # the Stop click's rerun
    worker.join(60)
    (run,) = db.list_eval_runs(store)
    assert run.status == "cancelled" and 0 < run.n_results < 48
    assert f"Run #{run.id} stopped: {run.n_results} results stored; Resume under Unfinished runs continues it." in [
        w.value for w in at.warning]
    (line,) = [m for m in markdowns(at) if m.startswith(f"#{run.id} ")]
    assert line.endswith(f" · stopped - {run.n_results} results saved")
    assert not at.button(key=f"ev_resume_{run.id}").disabled
    # a run stored as running that nothing runs (the server stopped meanwhile) is not said to be running
    stray = db.create_eval_run(store, corpus_id=corpus_id, query_set_id=qs_id, config={"model": "minilm", "layer": 5})
    ok(at.run())
    (line,) = [m for m in markdowns(at) if m.startswith(f"#{stray.id} ")]
    assert line.endswith(" · interrupted - 0 results saved")
    assert any(c.value.startswith("interrupted: stored as running, but no process has worked on it for 30 s")
               for c in at.caption)
    store.close()


def test_a_run_another_process_works_on_is_followed_not_resumed_or_deleted() -> None:
    """A run the CLI works on beside the app (its heartbeat fresh) reads 'running elsewhere' with its stored
    progress; Resume and Delete are off. Once that process has been silent for db.LIVE_WINDOW_S, the run is
    'interrupted' and Resume is on."""
    from datetime import timedelta

    from sqlalchemy import update

    from db.models import EvalRun, utcnow

    at = eval_page()
    store = _store()
    corpus_id, qs_id = demo(store)
    run = db.create_eval_run(store, corpus_id=corpus_id, query_set_id=qs_id, owner="gpu-box pid 4242 #0badc0de",
                             config={"model": "minilm", "layer": 5, "strategies": ["standard", "mrag"],
                                     "n_queries": 24})
    ok(at.run())
    (line,) = [m for m in markdowns(at) if m.startswith(f"#{run.id} ")]
    assert line.endswith(" · running elsewhere - 0 results saved")
    assert at.button(key=f"ev_resume_{run.id}").disabled
    assert any(c.value.startswith(rf"#{run.id} is running elsewhere (gpu\-box pid 4242): 0 of 48 results stored, "
                                  "last heard from ") for c in at.caption)
    assert not db.eval_stop_requested(store, run.id)
    ok(at.button(key=f"ev_stop_elsewhere_{run.id}").click().run())  # asks that process, through the database
    assert db.eval_stop_requested(store, run.id) and at.button(key=f"ev_stop_elsewhere_{run.id}").disabled
    assert any(c.value.startswith(f"#{run.id} is running elsewhere") and c.value.endswith(
        "Asked to stop: it stops after its current batch.") for c in at.caption)
    ok(at.selectbox(key="ev_view_run").set_value(run.id).run())
    assert at.button(key="ev_delete").disabled
    with store.session() as session:  # that process died
        session.execute(update(EvalRun).where(EvalRun.id == run.id)
                        .values(heartbeat_at=utcnow() - timedelta(seconds=db.LIVE_WINDOW_S + 1)))
    ok(at.run())
    (line,) = [m for m in markdowns(at) if m.startswith(f"#{run.id} ")]
    assert line.endswith(" · interrupted - 0 results saved")
    assert not at.button(key=f"ev_resume_{run.id}").disabled and not at.button(key="ev_delete").disabled
    assert not any("running elsewhere" in c.value for c in at.caption)
    store.close()


@pytest.mark.usefixtures("demo_indexed")
def test_a_stopped_layer_sweep_is_resumed_as_a_sweep() -> None:
    """A sweep stopped during its first layer is one 'Unfinished runs' row naming every layer, and 'Resume sweep'
    finishes them all (Resume finished only the stopped layer; the others never ran). Before that the Layer sweep
    tab offers nothing (it offered one-layer 'sweeps'); after, the sweep with whole-layer ticks. Layer 5's index
    exists (the session's demo index): only layer 2's is built."""
    at = eval_page()
    store = _store()
    corpus_id, qs_id = demo(store)
    cancel = threading.Event()
    ids = eval_sweeps.layer_sweep(store, corpus_id=corpus_id, query_set_id=qs_id, layers=[2, 5],
                         settings=RetrievalSettings(strategies=["standard", "mrag"], k_max=8), cancel=cancel,
                         batch_size=8,
                         progress=lambda s, d, t: cancel.set() if s == "layer 2 (1/2): evaluation" else None)
    (first,) = [db.get_eval_run(store, i) for i in ids]
    assert first.status == "cancelled" and first.n_results > 0
    ok(at.run())
    (row,) = [m for m in markdowns(at) if m.startswith("Layer sweep")]
    assert row == (f"Layer sweep · minilm · layers 2, 5 · Demo queries — layer 2: #{first.id} stopped, "
                   f"{first.n_results} results; layer 5: not started")
    assert not [m for m in markdowns(at) if m.startswith(f"#{first.id} ")]  # not listed again as a lone run
    assert "No layer sweep yet" in " ".join(i.value for i in at.info)
    sweep = first.config["sweep"]
    ok(at.button(key=f"ev_resume_sweep_{sweep}").click().run())
    runs = sorted(db.list_eval_runs(store), key=lambda r: r.id)
    assert [(r.config["layer"], r.status, r.n_results) for r in runs] == [(2, "done", 48), (5, "done", 48)]
    assert [s.value for s in at.success] == [f"Run #{r.id} done: 48 results stored." for r in runs]
    assert not [m for m in markdowns(at) if m.startswith("Layer sweep")] and not [
        b for b in at.button if b.key.startswith("ev_resume")]
    assert at.selectbox(key="ev_sweep").options == ["minilm · layers 2, 5 · Demo queries"]
    (chart,) = [c for c in at.get("plotly_chart") if "by layer" in c.proto.spec]
    xaxis = json.loads(chart.proto.spec)["layout"]["xaxis"]
    assert xaxis["tickvals"] == [2, 5] and xaxis["ticktext"] == ["2", "5"]  # no 2.5, 3.5, 4.5 ticks
    store.close()


def test_settings_survive_a_visit_to_another_page() -> None:
    """The New run settings are kept for the session (they were back to their defaults after a visit to another
    page), and k_max is kept as chosen: shown as 3 on a 3-document corpus, 12 again on the demo."""
    at = app()
    store = _store()
    tiny = db.create_corpus(store, "Zz three documents")
    db.add_documents(store, tiny.id, [{"title": f"doc {i}", "text": f"Text number {i}.", "label": "x"}
                                      for i in range(3)])
    db.create_query_set(store, tiny.id, "tiny queries")
    store.close()
    ok(at.switch_page("pages/9_Evaluation_Runs.py").run())
    at.text_input(key="ev_layers").input("2,4")
    at.selectbox(key="ev_variant").set_value("decay")
    at.number_input(key="ev_c").set_value(8)
    at.number_input(key="ev_kmax").set_value(12)
    ok(at.multiselect(key="ev_strats").set_value(["standard", "split"]).run())
    ok(at.switch_page("pages/6_Attention.py").run())
    ok(at.switch_page("pages/9_Evaluation_Runs.py").run())
    assert at.text_input(key="ev_layers").value == "2,4" and at.selectbox(key="ev_variant").value == "decay"
    assert at.number_input(key="ev_c").value == 8 and at.number_input(key="ev_kmax").value == 12
    assert at.multiselect(key="ev_strats").value == ["standard", "split"]
    corpora = at.selectbox(key="_corpus_id_select")
    demo_index = next(i for i, o in enumerate(corpora.options) if o.startswith("MRAG Studio demo"))
    ok(corpora.select_index(next(i for i, o in enumerate(corpora.options) if o.startswith("Zz three"))).run())
    assert at.number_input(key="ev_kmax").value == 3
    ok(at.selectbox(key="_corpus_id_select").select_index(demo_index).run())
    assert at.number_input(key="ev_kmax").value == 12


def test_compare_tab_views_and_the_drilldown_opens_the_runs_own_index() -> None:
    """Sweep layers 1, 3; compare #1 standard and #1 mrag (layer 1): the means table puts the reference first,
    the differences never read -0.000, and 'Open this query in Compare' opens Compare on layer 1's index (not
    the newest, layer 3's), so its numbers are the run's."""
    at = eval_page()
    store = _store()
    corpus_id, qs_id = demo(store)
    first_id, last_id = eval_sweeps.layer_sweep(store, corpus_id=corpus_id, query_set_id=qs_id, layers=[1, 3],
                                       settings=RetrievalSettings(strategies=["standard", "mrag", "fusion"], k_max=8))
    first = db.get_eval_run(store, first_id)
    newest = db.list_embedding_runs(store, corpus_id, status="done")[0]
    assert newest.layer == 3 and first.embedding_run_id != newest.id
    store.close()
    ok(at.run())
    # the viewed run has a Fusion strategy: its figures say how deep the fused lists are
    assert any(c.value == eval_results.FUSED_RUN_NOTE for c in at.caption)
    # the sweep's Standard and Fusion lines are flat: the Layer sweep tab says why
    assert any(c.value.startswith("Standard, Split and Fusion RAG search the model's final embedding, whatever the "
                                  "layer") for c in at.caption)
    at.multiselect(key="ev_cmp_items").set_value([(first_id, "standard"), (first_id, "mrag")]).run()
    ok(at)
    means = next(d.value for d in at.dataframe if f"#{first_id} mrag" in d.value.columns)
    assert list(means.columns) == [f"#{first_id} standard", f"#{first_id} standard 95% CI", f"#{first_id} mrag",
                                   f"#{first_id} mrag 95% CI"]  # the reference first, each mean's interval next
    assert list(means.index)[-1] == "all"
    tests = next(d.value for d in at.dataframe if "wilcoxon_p" in d.value.columns)
    assert all(isinstance(v, str) and v != "-0.000" for v in tests["mean_diff"])
    assert all(v == "0.000" or v[0] in "+-" for v in tests["mean_diff"])
    per_query = next(d.value for d in at.dataframe if "query_id" in d.value.columns and "text" in d.value.columns)
    row = per_query[per_query["n_aspects"] == 3].iloc[0]
    ok(at.selectbox(key="ev_cmp_query").set_value(int(row["query_id"])).run())
    at.button(key="ev_cmp_open").click().run()
    # (AppTest reruns every page through Streamlit's pages-folder mode first, where the app's page_setup switches to
    # it again, and a click is lost on the way: the Evaluation Runs page runs alone, whose switch to Compare fails
    # after the session was set up for it, and Compare is opened with that session, as test_explorer_pages does.)
    assert [e.value for e in at.exception] and "`pages/5_Compare.py`" in at.exception[0].value
    cmp = AppTest.from_file(str(ROOT / "pages" / "5_Compare.py"), default_timeout=TIMEOUT)
    for key in ("corpus_id", "compare_query_id", "compare_drilldown"):
        cmp.session_state[key] = at.session_state[key]
    at = ok(cmp.run())
    # Compare, on the run's index, exact search, with the query's results shown
    assert at.selectbox(key="compare_run").value.id == first.embedding_run_id
    assert at.selectbox(key="compare_query").value.id == int(row["query_id"])
    metrics = next(d.value for d in at.dataframe if "RSR" in d.value.columns).set_index("strategy")
    assert list(metrics.index) == ["Standard RAG", "MRAG"]
    weighted = metrics["weighted (2·RSR+CSR)/3"]
    assert weighted["Standard RAG"] == pytest.approx(row[f"#{first_id} standard"])
    assert weighted["MRAG"] == pytest.approx(row[f"#{first_id} mrag"])
    assert any(c.value.startswith(f"Opened from evaluation run #{first_id}: its index") for c in at.caption)
    st.cache_resource.clear()
