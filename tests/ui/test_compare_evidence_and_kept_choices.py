"""QA: Compare's MRAG evidence says how votes are counted in the ranks it shows. AppTest on the demo corpus,
with a finished MiniLM index (a copy of the session's demo index; building through the Index page is tested in
test_explorer_pages)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.ui.conftest import module_env  # noqa: E402

PAGES = Path(__file__).resolve().parents[2] / "pages"
TIMEOUT = 120


@pytest.fixture(scope="module")
def built(tmp_path_factory, demo_index_db):
    with module_env(tmp_path_factory, "qa_compare", start_from=demo_index_db):
        yield


def test_evidence_caption_matches_the_votes_shown(built):
    """The caption said 'the document at rank p of head i gets s_i · 2^-p votes' beside ranks shown from #1,
    where a head's #1 gets s_i (2^0) and its #2 s_i / 2: read as written, every vote was off by a factor 2."""
    at = AppTest.from_file(str(PAGES / "5_Compare.py"), default_timeout=TIMEOUT).run()
    at.button(key="compare_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    caption = next(c.value for c in at.caption if c.value.startswith("Each head searches its own space"))
    assert "rank r of head i (#1 the nearest) gets s_i · 2^-(r-1) votes" in caption
    frames = [d.value for d in at.dataframe]
    importance = next(f for f in frames if "ground-truth documents (rank)" in f.columns)
    s = {int(h[1:]): v for h, v in zip(importance["head"], importance["importance"])}
    per_doc = next(f for f in frames if "heads (rank in head, vote)" in f.columns)
    votes = [(int(h), int(r), float(v)) for cell in per_doc["heads (rank in head, vote)"]
             for h, r, v in re.findall(r"h(\d+) \(#(\d+), ([\d.]+)\)", cell)]
    assert any(r == 1 for _, r, _ in votes) and any(r > 1 for _, r, _ in votes)
    for head, rank, vote in votes:  # what the caption says, in the ranks the table shows
        assert vote == pytest.approx(s[head] * 2.0 ** -(rank - 1), abs=1e-3)


def test_reader_choices_survive_a_visit_to_another_page(built):
    """The Reader's Left / Right lists, k and Max answer tokens went back to Standard / MRAG / the aspects / 128
    after a look at another page (Streamlit forgets a widget a page run does not draw), while its query was kept."""
    at = AppTest.from_file(str(PAGES.parent / "app.py"), default_timeout=TIMEOUT).run()
    at.switch_page("pages/10_Reader.py").run()
    assert not at.exception, [e.value for e in at.exception]
    at.selectbox(key="reader_left").set_value("split")
    at.selectbox(key="reader_right").set_value("fusion-mrag")
    at.number_input(key="reader_k").set_value(3)
    at.number_input(key="reader_max_tokens").set_value(64).run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("pages/6_Attention.py").run()
    at.switch_page("pages/10_Reader.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="reader_left").value == "split" and at.selectbox(key="reader_right").value == "fusion-mrag"
    assert at.number_input(key="reader_k").value == 3 and at.number_input(key="reader_max_tokens").value == 64


def test_maps_choices_survive_a_visit_to_another_page(built):
    """Maps' Method, Seed, query source, typed query, strategy and k went back to PCA / 0 / None / '' / MRAG / 5
    after a look at another page (the README: the choices on Index, Compare, Attention and Maps are kept)."""
    at = AppTest.from_file(str(PAGES.parent / "app.py"), default_timeout=TIMEOUT).run()
    at.switch_page("pages/7_Maps.py").run()
    assert not at.exception, [e.value for e in at.exception]
    at.radio(key="maps_qsrc").set_value("Type a query").run()
    at.text_input(key="maps_typed").input("Lighthouses and kefir").run()
    at.selectbox(key="maps_strategy").set_value("standard")
    at.number_input(key="maps_k").set_value(7).run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("pages/6_Attention.py").run()
    at.switch_page("pages/7_Maps.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="maps_qsrc").value == "Type a query"
    assert at.text_input(key="maps_typed").value == "Lighthouses and kefir"
    assert at.selectbox(key="maps_strategy").value == "standard" and at.number_input(key="maps_k").value == 7
    at.selectbox(key="maps_method").set_value("umap").run()  # stops at 'Compute UMAP maps': nothing computed here
    at.switch_page("pages/6_Attention.py").run()
    at.switch_page("pages/7_Maps.py").run()
    assert at.selectbox(key="maps_method").value == "umap"
