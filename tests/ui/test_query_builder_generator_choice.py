"""Query Builder's generator choice (AppTest, a real OpenAI-compatible server on 127.0.0.1): with an LLM
configured the page offers "LLM" or "Offline composer (no LLM)", as the command line's ``--generator``; the
offline choice sends no request and writes the same queries as the offline composer without an endpoint; a set
started offline is resumed offline, whatever is configured now. Without an endpoint there is no choice to make."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

import db  # noqa: E402
from services.workflows import querysets as qw  # noqa: E402
from tests.support.openai_server import FakeOpenAIServer  # noqa: E402

QUERY_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "8_Query_Builder.py")

pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _generate(at: AppTest, name: str) -> AppTest:
    at.text_input(key="qb_gen_name").set_value(name)
    at.multiselect(key="qb_gen_counts").set_value([1, 2])
    at.number_input(key="qb_gen_per").set_value(2)
    at.number_input(key="qb_gen_seed").set_value(3)
    return ok(at.button(key="qb_gen_start").click().run())


def _texts(store: db.Store, query_set_id: int) -> list[tuple[int, str, str]]:
    return sorted((q.n_aspects, q.text, q.generator) for q in db.list_queries(store, query_set_id))


def test_with_an_llm_the_offline_generator_can_be_chosen_and_resumes_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIServer(lambda body: "An LLM story that should never be asked for.") as server:
        server.set_env(monkeypatch)
        at = ok(AppTest.from_file(QUERY_PAGE, default_timeout=60).run())
        choice = at.radio(key="qb_gen_kind")
        assert (choice.options, choice.value) == (["LLM", "Offline composer (no LLM)"], "llm")
        assert any(s.value.startswith("Stories are written by the LLM") for s in at.success)
        choice.set_value("offline")
        ok(at.run())
        assert any(i.value.startswith("Offline: queries are written by the **offline composer**") for i in at.info)
        _generate(at, "Offline here")
        assert "Query set ready: 4 ok, 0 flagged, 0 failed." in [s.value for s in at.success]
        assert server.requests == []  # not one request to the configured endpoint
        store = db.open_store(os.environ["MRAG_DATABASE_URL"])
        corpus = db.list_corpora(store)[0]
        mine = next(s for s in db.list_query_sets(store, corpus.id) if s.name == "Offline here")
        assert (mine.source, mine.params["generator"]) == ("generated-offline", "offline-composer")
        # the same queries as the offline composer writes with no endpoint at all
        alone = qw.generate_query_set(store, corpus_id=corpus.id, name="No endpoint", aspect_counts=[1, 2],
                                      per_count=2, seed=3, client=None)
        assert _texts(store, mine.id) == _texts(store, alone.query_set_id)
        assert {g for _, _, g in _texts(store, mine.id)} == {"offline-composer"}

        # one query of it gone: Resume (the LLM still configured, "LLM" chosen) writes it offline again
        gone = db.list_queries(store, mine.id)[0]
        db.delete_query(store, gone.id)
        at.radio(key="qb_gen_kind").set_value("llm")
        ok(at.run())
        ok(at.button(key=f"qb_resume_{mine.id}").click().run())
        assert server.requests == []
        assert _texts(store, mine.id) == _texts(store, alone.query_set_id)
        store.close()


def test_without_an_llm_there_is_no_generator_choice() -> None:
    at = ok(AppTest.from_file(QUERY_PAGE, default_timeout=60).run())
    assert not [r for r in at.radio if r.key == "qb_gen_kind"]
    assert any(i.value.startswith("No LLM endpoint configured: queries are written by the **offline composer**")
               for i in at.info)
