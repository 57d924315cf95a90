"""The stored-query picker (query set, "Aspects" filter, query) on a real SQLite file, through AppTest."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

import db


def _script(url: str, corpus_id: int, stop: bool) -> None:
    import streamlit as st

    import db
    from ui.query_widgets import stored_query_picker

    preselect = st.session_state.pop("preselect", None)  # a drill-down, read once as Compare does
    q = stored_query_picker(db.open_store(url), corpus_id, key="t", stop=stop, preselect=preselect)
    st.markdown(f"after: {None if q is None else q.id}")


def _app(url: str, corpus_id: int, stop: bool = True) -> AppTest:
    at = AppTest.from_function(_script, args=(url, corpus_id, stop), default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _after(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("after:")]


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[str, int, list[int]]:
    """A SQLite file with one corpus of five documents; (url, corpus id, document ids)."""
    url = f"sqlite:///{tmp_path / 'q.db'}"
    store = db.open_store(url)
    c = db.create_corpus(store, "C")
    db.add_documents(store, c.id, [{"title": f"D{i}", "text": f"document {i}"} for i in range(5)])
    ids = db.document_ids(store, c.id)
    store.close()
    return url, c.id, ids


def test_without_query_set_a_note_then_stop_or_none(corpus):
    url, cid, _ = corpus
    at = _app(url, cid, stop=True)
    assert [i.value for i in at.info] == [
        "This corpus has no query set yet: build one on the Query Builder page, or type the text instead."]
    assert _after(at) == []  # the page stopped there
    at = _app(url, cid, stop=False)
    assert len(at.info) == 1 and _after(at) == ["after: None"]  # the page goes on (Maps draws its maps)


def test_a_set_of_failed_queries_only_has_nothing_to_pick(corpus):
    url, cid, _ = corpus
    store = db.open_store(url)
    qs = db.create_query_set(store, cid, "Broken")
    db.add_queries(store, qs.id, [{"text": "", "status": "failed", "error": "the LLM answer did not parse"}])
    store.close()
    at = _app(url, cid, stop=False)
    assert [i.value for i in at.info] == ["This query set has no query with a text."]
    assert _after(at) == ["after: None"]


def test_aspects_filter_counts_filters_and_falls_back_on_another_set(corpus):
    url, cid, ids = corpus
    store = db.open_store(url)
    second = db.create_query_set(store, cid, "Second")  # sets are listed newest first
    (two,) = db.add_queries(store, second.id, [{"text": "two topics", "ground_truth": ids[:2]}])
    first = db.create_query_set(store, cid, "First")
    one, three, three_b = db.add_queries(store, first.id, [
        {"text": "one topic", "ground_truth": ids[:1]},
        {"text": "three topics", "ground_truth": ids[:3]},
        {"text": "three more topics", "ground_truth": ids[2:5]},
    ])
    db.add_queries(store, first.id, [{"text": "", "status": "failed"}])  # not offered
    store.close()

    at = _app(url, cid)
    aspects = at.selectbox(key="t_aspects")
    assert aspects.options == ["all (3)", "1 (1)", "3 (2)"] and aspects.value == "all" and not aspects.disabled
    assert at.selectbox(key="t_query").options == [
        "[1 aspect] one topic", "[3 aspects] three topics", "[3 aspects] three more topics"]
    assert _after(at) == [f"after: {three}"]  # the default: the first query with the most aspects

    at.selectbox(key="t_query").select_index(0).run()
    assert _after(at) == [f"after: {one}"]
    at.run()
    assert _after(at) == [f"after: {one}"]  # the user's pick stays
    aspects.select(3).run()
    qsel = at.selectbox(key="t_query")
    assert qsel.options == ["[3 aspects] three topics", "[3 aspects] three more topics"]
    assert _after(at) == [f"after: {three}"]  # the pick was filtered out: the default of what is left
    qsel.select_index(1).run()
    assert _after(at) == [f"after: {three_b}"]

    # the second set has no 3-aspect query: the filter goes back to all, and is off (one count only)
    at.selectbox(key="t_qs").select_index(1).run()
    assert not at.exception
    aspects = at.selectbox(key="t_aspects")
    assert aspects.value == "all" and aspects.options == ["all (1)", "2 (1)"] and aspects.disabled
    assert at.selectbox(key="t_query").options == ["[2 aspects] two topics"]
    assert _after(at) == [f"after: {two}"]


def test_most_aspects_index_is_the_first_of_the_largest():
    from ui.query_widgets import most_aspects_index

    def rows(*aspects: int) -> list:
        return [SimpleNamespace(id=i, n_aspects=n) for i, n in enumerate(aspects)]

    assert most_aspects_index(rows(1, 3, 2, 3)) == 1
    assert most_aspects_index(rows(5)) == 0
    assert most_aspects_index(rows(1, 1, 2)) == 2
    assert most_aspects_index([]) == 0


def test_choices_follow_their_items_when_counts_and_texts_change(corpus):
    """The boxes show counts ("Second (1)", "3 (2)") and query texts; when they change (a query added, a text
    edited, on another page or tab) each box stays on what was chosen instead of falling back to its first option."""
    url, cid, ids = corpus
    store = db.open_store(url)
    second = db.create_query_set(store, cid, "Second")
    two, one_b = db.add_queries(store, second.id, [{"text": "two topics", "ground_truth": ids[:2]},
                                                   {"text": "one more topic", "ground_truth": ids[4:]}])
    first = db.create_query_set(store, cid, "First")  # newest: listed first
    db.add_queries(store, first.id, [{"text": "one topic", "ground_truth": ids[:1]},
                                     {"text": "three topics", "ground_truth": ids[:3]},
                                     {"text": "three more topics", "ground_truth": ids[2:5]}])
    at = _app(url, cid)
    at.selectbox(key="t_qs").select_index(1).run()
    assert at.selectbox(key="t_qs").value.id == second.id and _after(at) == [f"after: {two}"]
    at.selectbox(key="t_query").select_index(1).run()
    assert _after(at) == [f"after: {one_b}"]

    db.add_queries(store, second.id, [{"text": "another two", "ground_truth": ids[2:4]}])  # "Second (2)" -> (3)
    db.update_query(store, one_b, text="one more topic, reworded")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="t_qs").value.id == second.id
    assert _after(at) == [f"after: {one_b}"]

    at.selectbox(key="t_qs").select_index(0).run()
    at.selectbox(key="t_aspects").select(3).run()
    assert at.selectbox(key="t_aspects").value == 3
    db.add_queries(store, first.id, [{"text": "yet three topics", "ground_truth": ids[1:4]}])  # "3 (2)" -> "3 (3)"
    at.run()
    assert at.selectbox(key="t_aspects").value == 3
    assert at.selectbox(key="t_query").options == [
        "[3 aspects] three topics", "[3 aspects] three more topics", "[3 aspects] yet three topics"]
    store.close()


def test_a_drill_down_selects_its_set_and_query_over_the_users_choice(corpus):
    url, cid, ids = corpus
    store = db.open_store(url)
    second = db.create_query_set(store, cid, "Second")
    _, target = db.add_queries(store, second.id, [{"text": "two topics", "ground_truth": ids[:2]},
                                                  {"text": "one topic", "ground_truth": ids[4:]}])
    first = db.create_query_set(store, cid, "First")
    db.add_queries(store, first.id, [{"text": "a", "ground_truth": ids[:1]}, {"text": "b", "ground_truth": ids[:3]}])
    store.close()
    at = _app(url, cid)
    at.selectbox(key="t_aspects").select(3).run()
    at.session_state["preselect"] = (second.id, target)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.warning, [w.value for w in at.warning]  # no "default value and Session State" warning
    assert at.selectbox(key="t_qs").value.id == second.id and at.selectbox(key="t_aspects").value == "all"
    assert _after(at) == [f"after: {target}"]
    at.run()
    assert _after(at) == [f"after: {target}"]  # and stays there
