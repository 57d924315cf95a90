"""Query Builder: a query set cannot be deleted while another process generates queries into it or an evaluation
run scores it (both would fail half-way, as the corpus deletion already guards against); the page says what runs,
by which process, and keeps the set. Once nothing runs, deleting works as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from services.workflows import querysets as qw
from ui.render import md_plain

ROOT = Path(__file__).resolve().parents[2]
QUERY_PAGE = str(ROOT / "pages" / "8_Query_Builder.py")
OTHER = "gpu-box pid 4242 #0badc0de"
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def _set_with_query(store: db.Store) -> tuple[db.CorpusInfo, db.QuerySetInfo]:
    c = db.create_corpus(store, "Space mix")
    db.add_documents(store, c.id, [{"title": "Moon", "text": "The Moon orbits Earth.", "label": "moon"},
                                         {"title": "Mars", "text": "Mars is red.", "label": "mars"}])
    q = qw.add_manual_query_to_new_set(store, c.id, "Hand *set*", text="Moon and Mars",
                                       ground_truth=db.document_ids(store, c.id))
    return c, db.get_query_set(store, q.query_set_id)


def _page(store: db.Store, corpus_id: int, qs_id: int) -> AppTest:
    at = AppTest.from_file(QUERY_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.session_state[f"qb_del_set_open_{qs_id}"] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_set_work_in_progress_names_generation_and_live_runs() -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    c, qs = _set_with_query(store)
    assert qw.set_work_in_progress(store, qs.id) == []
    db.take_lease(store, qw.generation_lease(qs.id), OTHER, "Query generation for set", qs.id)
    run = db.create_eval_run(store, corpus_id=c.id, query_set_id=qs.id, name="Night run", owner=OTHER)
    busy = qw.set_work_in_progress(store, qs.id)
    assert len(busy) == 2
    assert busy[0].startswith("queries are being generated into it (gpu-box pid 4242, started ")
    assert busy[1] == f"evaluation run 'Night run' (#{run.id}) is scoring it (gpu-box pid 4242)"
    db.release_lease(store, qw.generation_lease(qs.id), OTHER)
    db.finish_eval_run(store, run.id, status="cancelled", owner=OTHER)
    assert qw.set_work_in_progress(store, qs.id) == []
    store.close()


def test_delete_is_refused_while_generation_runs_elsewhere_then_works() -> None:
    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    c, qs = _set_with_query(store)
    db.take_lease(store, qw.generation_lease(qs.id), OTHER, "Query generation for set", qs.id)
    at = _page(store, c.id, qs.id)
    (info,) = [i.value for i in at.info if "cannot be deleted" in i.value]
    assert info.startswith("This query set cannot be deleted while " + md_plain(
        "queries are being generated into it (gpu-box pid 4242, started ")), info
    assert at.checkbox(key=f"qb_del_set_sure_{qs.id}").disabled and at.button(key="qb_del_set").disabled
    assert db.get_query_set(store, qs.id).n_queries == 1

    db.release_lease(store, qw.generation_lease(qs.id), OTHER)
    at = _page(store, c.id, qs.id)
    assert not [i for i in at.info if "cannot be deleted" in i.value]
    at.checkbox(key=f"qb_del_set_sure_{qs.id}").check().run()
    # a generation starts elsewhere between the page showing the button and the click: the click deletes nothing
    db.take_lease(store, qw.generation_lease(qs.id), OTHER, "Query generation for set", qs.id)
    at.button(key="qb_del_set").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert db.get_query_set(store, qs.id).n_queries == 1 and not at.success

    db.release_lease(store, qw.generation_lease(qs.id), OTHER)
    at.run()
    at.button(key="qb_del_set").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [s.id for s in db.list_query_sets(store, c.id)] == []
    store.close()
