"""The demo's centre piece: Compare opens on the demo corpus with the first query of the most aspects preselected
(Home's step 2). With the shipped MiniLM index that query must show what the demo is about: MRAG finding aspects
that Standard RAG misses. The first 6-aspect demo query used to be one where the two tie (RSR 0.33 each), so a
presenter pressing Compare showed no difference at all. And the Reader's panel is named once where it appears.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.support.apptest import no_exceptions  # noqa: E402
from tests.ui.conftest import module_env  # noqa: E402

PAGES = os.path.join(os.path.dirname(__file__), "..", "..", "pages")
PAGE = os.path.join(PAGES, "5_Compare.py")


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory, demo_index_db):
    """The demo corpus with a finished MiniLM index (last layer, mean pooling), as Home's step 1 builds it (a copy
    of the session's demo index)."""
    import torch

    with module_env(tmp_path_factory, "demo_walk2_showcase", start_from=demo_index_db):
        torch.set_num_threads(1)
        yield


def test_the_preselected_demo_query_shows_mrag_finding_aspects_standard_rag_misses(demo_index) -> None:
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    no_exceptions(at)
    assert at.selectbox(key="compare_query").value.n_aspects == 6  # the first query with the most aspects
    at.button(key="compare_go").click().run()
    no_exceptions(at)
    frames = [d.value for d in at.dataframe]
    (metrics,) = [f.set_index("strategy") for f in frames if "strategy" in f.columns]
    assert metrics.loc["MRAG", "RSR"] > metrics.loc["Standard RAG", "RSR"]
    assert metrics.loc["MRAG", "weighted (2·RSR+CSR)/3"] > metrics.loc["Standard RAG", "weighted (2·RSR+CSR)/3"]

    lists = [f for f in frames if "mark" in f.columns]  # one per strategy, in the order chosen

    def found(position: int) -> set[str]:
        rows = lists[position]
        return set(rows.loc[rows["mark"] == "✔ doc", "title"])

    assert at.multiselect(key="compare_strategies").value[:2] == ["standard", "mrag"]
    missed_by_standard = found(1) - found(0)
    assert missed_by_standard  # ground-truth documents in MRAG's list and not in Standard RAG's
    # and the evidence says which head found each of them
    (aspects,) = [f for f in frames if "ground-truth documents (rank)" in f.columns]
    for title in missed_by_standard:
        assert aspects["ground-truth documents (rank)"].str.contains(title, regex=False).any(), title


def test_the_reader_is_named_once_on_its_page_and_in_compares_expander(demo_index, monkeypatch) -> None:
    """The panel drew a 'Reader' heading of its own: under the Reader page's title 'Reader', and inside Compare's
    expander 'Reader: answer the query from two strategies' documents'."""
    for name in ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    at = AppTest.from_file(os.path.join(PAGES, "10_Reader.py"), default_timeout=120).run()
    no_exceptions(at)
    assert at.button(key="reader_go")  # the panel is drawn
    assert [t.value for t in at.title] == ["Reader"] and [h.value for h in at.subheader] == []

    at = AppTest.from_file(PAGE, default_timeout=120).run()
    at.button(key="compare_go").click().run()
    no_exceptions(at)
    assert at.button(key="compare_reader_go")
    assert "Reader" not in [h.value for h in at.subheader]
    assert [e.label for e in at.expander if e.label.startswith("Reader")] == [
        "Reader: answer the query from two strategies' documents"]
