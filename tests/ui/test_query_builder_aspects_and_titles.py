"""Query Builder, as an annotator checks a multi-aspect set before handing it on: the Review tab says how many
queries each number of aspects has (failed ones left out: they are not scored), and where two documents of
different categories share a title, the hand-written query's picks and the editor's ground truth name each
document's category, so the two can be told apart."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.apptest import no_exceptions, page_store

QUERY_PAGE = "../../pages/8_Query_Builder.py"
pytestmark = pytest.mark.usefixtures("fresh_env")


def test_review_shows_how_many_queries_each_number_of_aspects_has() -> None:
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()  # loads the demo corpus
    no_exceptions(at)
    at.text_input(key="qb_gen_name").set_value("Two to six")
    at.multiselect(key="qb_gen_counts").set_value([2, 3, 6])
    at.number_input(key="qb_gen_per").set_value(2)
    at.button(key="qb_gen_start").click().run()
    no_exceptions(at)
    store = page_store()
    qs = next(q for q in db.list_query_sets(store) if q.name == "Two to six")
    victim = next(q for q in db.list_queries(store, qs.id) if q.n_aspects == 6)
    db.update_query(store, victim.id, status="failed", error="HTTP 500")
    store.close()
    at.run()
    no_exceptions(at)
    assert "By number of aspects: 2 queries with 2 aspects · 2 queries with 3 aspects · 1 query with 6 aspects " \
           "(1 failed query not counted)" in [m.value for m in at.markdown]


def test_titles_shared_across_categories_are_told_apart_by_category() -> None:
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60).run()
    no_exceptions(at)
    store = page_store()
    corpus = db.list_corpora(store)[0]
    db.add_documents(store, corpus.id, [
        {"title": "Mercury", "text": "Mercury is the smallest planet and the closest to the Sun.", "label": "planets"},
        {"title": "Mercury", "text": "Mercury is a heavy metal that is liquid at room temperature.", "label": "metals"},
    ])
    planet, metal = sorted(db.list_documents(store, corpus.id, search="Mercury is").items, key=lambda d: d.label)[::-1]
    at.run()
    at.text_input(key="qb_hand_search").set_value("Mercury is").run()
    at.button(key=f"qb_pick_{planet.id}").click().run()
    at.button(key=f"qb_pick_{metal.id}").click().run()
    no_exceptions(at)
    assert "Ground truth: Mercury · planets, Mercury · metals" in [m.value for m in at.markdown]
    at.text_input(key="qb_hand_new").set_value("Two Mercuries")
    at.text_area(key="qb_hand_text").set_value("Is Mercury named after Mercury?")
    at.button(key="qb_hand_add").click().run()
    no_exceptions(at)
    qs = next(q for q in db.list_query_sets(store) if q.name == "Two Mercuries")
    (row,) = db.list_queries(store, qs.id)
    at.selectbox(key="qb_rev_set").set_value(qs).run()
    no_exceptions(at)
    editor = at.multiselect(key=f"qb_edit_gt_{row.id}")
    assert [editor.format_func(i) for i in editor.value] == ["Mercury · planets", "Mercury · metals"]
    store.close()


def test_aspect_summary_counts_usable_queries_only() -> None:
    """The helper behind the line: hand-computed on three usable queries and a failed one."""
    from ui.query_widgets import aspect_summary

    def row(n: int, status: str = "ok") -> db.QueryRow:
        return db.QueryRow(0, 0, "t", n, status, [], "", "", None, 0, [])  # type: ignore[arg-type]

    assert aspect_summary([row(3), row(1), row(3, "flagged"), row(2, "failed")]) == \
        "By number of aspects: 1 query with 1 aspect · 2 queries with 3 aspects (1 failed query not counted)"
    assert aspect_summary([]) == ""
