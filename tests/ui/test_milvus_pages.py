"""AppTest runs of the Index and Compare pages with ``MRAG_MILVUS_URI`` set (a real Milvus Lite folder): the Index
page writes the demo index to Milvus with progress, Compare then searches it by default with the in-process
answers; an unreachable Milvus is one clear message and Compare still searches in process."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

from mrag_core.strategy_registry import PRESELECTED  # noqa: E402
from tests.ui.conftest import module_env  # noqa: E402

PAGES = Path(__file__).resolve().parents[2] / "pages"
TIMEOUT = 120


@pytest.fixture(scope="module")
def env(tmp_path_factory, demo_index_db):
    with module_env(tmp_path_factory, "milvus-pages", start_from=demo_index_db) as tmp:
        mp = pytest.MonkeyPatch()
        mp.setenv("MRAG_MILVUS_URI", str(tmp / "milvus.db"))
        yield tmp
        mp.undo()


def page(name: str) -> AppTest:
    return AppTest.from_file(str(PAGES / name), default_timeout=TIMEOUT)


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def mrag_titles(at: AppTest) -> list[list[str]]:
    qsel = at.selectbox(key="compare_query")
    qsel.select_index(next(i for i, o in enumerate(qsel.options) if o.startswith("[5 aspects]"))).run()
    ok(at.button(key="compare_go").click().run())
    return [list(d.value["title"]) for d in at.dataframe if {"rank", "mark"} <= set(d.value.columns)]


@pytest.fixture(scope="module")
def written(env):
    """The Index page with backend milvus: Write the index to Milvus, rerun until it reports success."""
    at = ok(page("4_Index.py").run())
    at.selectbox(key="index_backend").set_value("milvus").run()
    ok(at)
    assert any("the index has no collections yet" in m for m in texts(at.info))
    at.button(key="index_milvus").click().run()
    deadline = time.time() + 300
    while not at.success and time.time() < deadline:
        ok(at)
        time.sleep(1.0)
        at.run()
    return at


def test_index_page_writes_the_index_to_milvus(written):
    msgs = texts(written.success)
    assert any("Milvus (milvus): 96 documents written, 96 ready." in m for m in msgs), msgs
    assert any("collections are ready" in c for c in texts(written.caption))


def test_compare_searches_milvus_by_default_with_the_in_process_answers(written):
    at = ok(page("5_Compare.py").run())
    assert at.selectbox(key="compare_backend").value == "milvus"  # ready collections: the serving default
    on_milvus = mrag_titles(at)
    at.selectbox(key="compare_backend").set_value("torch").run()
    assert mrag_titles(ok(at)) == on_milvus and len(on_milvus) == len(PRESELECTED)


def test_an_unreachable_milvus_is_one_message_and_compare_still_searches(written, monkeypatch):
    import streamlit as st

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MRAG_MILVUS_URI", f"http://127.0.0.1:{port}")
    st.cache_resource.clear()
    at = ok(page("4_Index.py").run())
    at.selectbox(key="index_backend").set_value("milvus").run()
    assert any("cannot be reached" in m and str(port) in m for m in texts(ok(at).error))  # (escaped Markdown)
    at = ok(page("5_Compare.py").run())
    assert any("cannot be reached" in m for m in texts(at.warning))
    assert at.selectbox(key="compare_backend").value == "torch"
    assert len(mrag_titles(at)) == len(PRESELECTED)
