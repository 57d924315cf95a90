"""The Evaluation Runs -> Compare drill-down sets Compare's widgets through session state; a widget that also
passes a default of its own makes Streamlit log "The widget with key ... was created with a default value but also
had its value set via the Session State API" (it logged it for ``compare_seed``). None may be logged."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402
from services.workflows.eval_comparison import DrillDown  # noqa: E402
from tests.support.compare_pages import COMPARE_PAGE  # noqa: E402


@pytest.fixture
def widget_state_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The widget-state warnings Streamlit logs meanwhile, every one: Streamlit logs only the first of a process
    (a module flag it sets after logging), so the flag is cleared before each widget's check (which starts by
    reading the session state)."""
    from streamlit.elements.lib import policies

    seen: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    real = policies.get_session_state

    def session_state_with_the_flag_cleared():  # noqa: ANN202 - Streamlit's SessionStateProxy
        policies._shown_default_value_warning = False
        return real()

    monkeypatch.setattr(policies, "get_session_state", session_state_with_the_flag_cleared)
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    handler = Catch(level=logging.WARNING)
    logger = logging.getLogger(policies.__name__)  # Streamlit's loggers do not propagate: listen on it directly
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


@pytest.mark.usefixtures("demo_indexed")
def test_drilldown_into_compare_logs_no_widget_state_warning(widget_state_warnings: list[str]) -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    corpus = db.list_corpora(store)[0]
    (index,) = db.list_embedding_runs(store, corpus.id, status="done")
    qs = db.list_query_sets(store, corpus.id)[0]
    target = next(q for q in db.list_queries(store, qs.id) if q.n_aspects == 3)
    store.close()
    at = AppTest.from_file(COMPARE_PAGE, default_timeout=120)
    at.session_state["run_backend"] = "faiss-hnsw"  # the Index page's choice; the run searched exactly
    at.session_state["compare_query_id"] = target.id  # what Evaluation Runs' "Open in Compare" sets
    at.session_state["compare_drilldown"] = DrillDown(run_id=7, query_id=target.id, embedding_run_id=index.id,
                                                      variant="decay", c=16, k=4, strategies=["standard", "mrag"],
                                                      seed=3)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # the drill-down took effect: the run's seed, strategies, voting and exact search
    assert at.number_input(key="compare_seed").value == 3
    assert at.multiselect(key="compare_strategies").value == ["standard", "mrag"]
    assert at.selectbox(key="compare_variant").value == "decay"
    assert at.selectbox(key="compare_backend").value == "torch"
    assert widget_state_warnings == []
    at.number_input(key="compare_seed").set_value(0).run()  # the user's choices rule afterwards, quietly
    at.button(key="compare_go").click().run()
    assert not at.exception and at.number_input(key="compare_seed").value == 0
    assert widget_state_warnings == []
