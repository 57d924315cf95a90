"""Plotly labels from the data show verbatim: titles, category names and tokens with ``<a href>``, ``<b>``,
``<i>`` or ``&`` in them reach the figure as entities, never as Plotly rich text (which would draw a link,
bold or italics, and eat the ``<...>``).

One temporary database: a small corpus whose titles and categories carry markup, indexed once through
the Index page (MiniLM); then the Compare, Maps, Attention and Agreement figures, read from the
figure JSON that Streamlit sends to the browser.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.ui.conftest import build_through_index_page, module_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120
LINK = '<a href="https://example.com/x">click me</a>'
BOLD = "<b>Bold</b> & Sons"
CAT = "<i>cats</i> & dogs"
TEXTS = ["Cats purr, sleep in the sun and chase mice around the barn at night.",
         "Dogs fetch sticks, guard the house and bark at the postman every morning.",
         "Glaciers carve valleys as the ice slowly moves downhill over centuries.",
         "Volcanoes erupt lava and ash when magma rises through the crust."]


def _page(name: str, corpus_id: int) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=TIMEOUT)
    at.session_state["corpus_id"] = corpus_id
    return at


def _ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def _spec(at: AppTest, index: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def _strings(value) -> list[str]:
    """Every string inside a figure's JSON that Plotly draws (labels, hover texts, names, titles): all but
    ``legendgroup``, an id that is never shown."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, v in value.items() if key != "legendgroup" for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _no_markup_from_data(spec: dict) -> list[str]:
    """The figure's strings that still hold the data's markup (should be none)."""
    return [s for s in _strings(spec.get("data", [])) + _strings(spec.get("layout", {}))
            if any(raw in s for raw in ("<a ", "<b>", "<i>", "& "))]


@pytest.fixture(scope="module")
def corpus_id(tmp_path_factory) -> int:
    import db

    with module_env(tmp_path_factory, "plot_labels"):
        store = db.open_store()
        c = db.create_corpus(store, "Markup")
        db.add_documents(store, c.id, [
            {"title": LINK, "text": TEXTS[0], "label": CAT},
            {"title": BOLD, "text": TEXTS[1], "label": CAT},
            {"title": "Glaciers", "text": TEXTS[2], "label": "earth"},
            {"title": "Volcanoes", "text": TEXTS[3], "label": "earth"},
        ])
        ids = db.document_ids(store, c.id)
        db.add_suggestions(store, [{"document_id": d, "agent": "test", "category": cat}
                                   for d, cat in zip(ids, (CAT, "earth", "earth", "earth"))])
        store.close()
        build_through_index_page(_page("4_Index.py", c.id).run())
        yield c.id


def test_compare_evidence_shows_titles_verbatim(corpus_id):
    at = _ok(_page("5_Compare.py", corpus_id).run())
    at.radio(key="compare_source").set_value("Type a query").run()
    at.text_area(key="compare_typed").input("pets that purr and bark").run()
    _ok(at.button(key="compare_go").click().run())
    spec = _spec(at)
    assert _no_markup_from_data(spec) == []
    ticks = spec["data"][0]["x"]
    assert len(ticks) == 4  # k = 5 by default for a typed query: all four documents, not 1
    assert any("&lt;a href=" in t for t in ticks) and any("&lt;b&gt;Bold&lt;/b&gt; &amp; Sons" in t for t in ticks)
    hover = [h for row in spec["data"][0]["hovertext"] for h in row]
    assert any("&lt;a href=\"https://example.com/x\"&gt;click me&lt;/a&gt;<br>rank" in h for h in hover)


def test_maps_show_titles_and_categories_verbatim(corpus_id):
    at = _ok(_page("7_Maps.py", corpus_id).run())
    spec = _spec(at)
    assert _no_markup_from_data(spec) == []
    names = {t.get("name") for t in spec["data"]}
    assert "&lt;i&gt;cats&lt;/i&gt; &amp; dogs" in names
    hover = [s for t in spec["data"] for s in t.get("text") or []]
    assert "&lt;b&gt;Bold&lt;/b&gt; &amp; Sons · &lt;i&gt;cats&lt;/i&gt; &amp; dogs" in hover


def test_attention_tokens_verbatim(corpus_id):
    at = _ok(_page("6_Attention.py", corpus_id).run())
    at.radio(key="attn_source").set_value("Type a text").run()
    at.text_area(key="attn_text").input("AT&T <b>").run()
    _ok(at)
    labels = _spec(at)["data"][0]["x"]
    assert labels[:7] == ["0:[CLS]", "1:at", "2:&amp;", "3:t", "4:&lt;", "5:b", "6:&gt;"]
    assert not any(c in label.replace("&amp;", "").replace("&lt;", "").replace("&gt;", "")
                   for label in labels for c in "<>&")


def test_agreement_confusion_matrix_names_verbatim(corpus_id):
    at = _ok(_page("3_Agreement_and_Export.py", corpus_id).run())
    spec = _spec(at)
    assert _no_markup_from_data(spec) == []
    assert "&lt;i&gt;cats&lt;/i&gt; &amp; dogs" in spec["data"][0]["x"]

