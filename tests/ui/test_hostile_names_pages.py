"""Security: names and texts from the data never reach the page as Markdown or HTML.

One temporary store holds a corpus whose name, categories, document titles and texts, query set name, query text
and evaluation run name all carry Markdown (bold, a link, an image) and raw HTML (``<img src=x onerror=...>``).
Every page is opened through the whole app (``app.py`` and ``switch_page``, as a user clicks through the sidebar),
and every element that Streamlit renders as Markdown (messages, captions, headings, widget labels, radio options,
expander and tab labels) is rendered here with CommonMark (raw HTML passing through where the element allows HTML,
as Streamlit does): none may draw the data's bold, link or image, nor let its ``<img>`` through. The Reader page's
LLM answer (from a real OpenAI-compatible server on 127.0.0.1) carries the same markup.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from markdown_it import MarkdownIt  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.support.hostile import TEXTS, add_hostile_corpus  # noqa: E402
from tests.support.openai_server import FakeOpenAIServer, Reply  # noqa: E402
from tests.ui.conftest import module_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
HOSTILE = "**x** [click](http://evil.example/a) ![i](http://evil.example/i.png) <img src=x onerror=alert(1)>"
MD_HTML = MarkdownIt("commonmark")  # raw HTML passes through: st.markdown(..., unsafe_allow_html=True)
MD_TEXT = MarkdownIt("commonmark", {"html": False})  # raw HTML shown as text: every other Markdown element
MARKDOWN_TYPES = {"markdown", "caption", "title", "header", "subheader", "error", "warning", "info", "success",
                  "toast", "exception"}
LABELLED_TYPES = {"button", "checkbox", "toggle", "radio", "metric", "expandable", "tab", "selectbox",
                  "multiselect", "text_input", "text_area", "number_input", "slider", "download_button"}


def drawn(source: str, allow_html: bool) -> str:
    """The HTML a browser gets for the Markdown ``source`` (Streamlit's renderer follows CommonMark)."""
    return (MD_HTML if allow_html else MD_TEXT).render(source)


def injected(html: str) -> list[str]:
    """What of :data:`HOSTILE` became markup in ``html``: its bold, its link, its image, its raw ``<img>``."""
    found = []
    if "<strong>x</strong>" in html:
        found.append("bold")
    if 'href="http://evil.example' in html:
        found.append("link")
    if "<img" in html:
        found.append("image")
    if "onerror=" in html and "&lt;img" not in html:
        found.append("onerror")
    return found


def _nodes(node: Any) -> Iterator[Any]:
    """Every element and block under ``node`` (an AppTest tree node), depth first."""
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _nodes(child)


def markdown_sources(at: AppTest) -> list[tuple[str, str, bool]]:
    """(element type, Markdown source, whether raw HTML is allowed) of every element on the page that Streamlit
    renders as Markdown: message bodies, captions and headings, and the labels of widgets, expanders and tabs
    (and radio options, which are Markdown too; select box options are plain text)."""
    out: list[tuple[str, str, bool]] = []
    for node in _nodes(at._tree):
        kind = getattr(node, "type", "")
        proto = getattr(node, "proto", None)
        if kind in MARKDOWN_TYPES:
            value = getattr(node, "value", None)
            if isinstance(value, str):
                out.append((kind, value, bool(getattr(proto, "allow_html", False))))
        if kind in LABELLED_TYPES or kind in ("expandable", "tab"):
            label = getattr(node, "label", None)
            if isinstance(label, str):
                out.append((f"{kind} label", label, False))
        if kind == "radio":
            out.extend(("radio option", str(o), False) for o in node.options)
    return out


def injections(at: AppTest) -> list[tuple[str, str, list[str]]]:
    """The page's Markdown elements that draw the hostile data as markup: (type, source, what)."""
    return [(kind, src, found) for kind, src, html in markdown_sources(at)
            if (found := injected(drawn(src, html)))]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Iterator[dict[str, int]]:
    """A store with one corpus of hostile names, an index, a query set and a named evaluation run of it, and a
    one-document corpus with a hostile name (for the Evaluation page's refusal); the ids by name."""
    import torch

    import db

    with module_env(tmp_path_factory, "hostile") as tmp:
        torch.set_num_threads(1)
        store = db.open_store()
        added = add_hostile_corpus(store, HOSTILE, HOSTILE)
        small = db.create_corpus(store, f"Small {HOSTILE}")
        db.add_documents(store, small.id, [{"title": "Only", "text": TEXTS[3]}])
        small_qs = db.create_query_set(store, small.id, f"Small set {HOSTILE}")
        only = db.document_ids(store, small.id)
        db.add_queries(store, small_qs.id, [{"text": "What erupts?", "ground_truth": only}])
        store.close()
        assert tmp.exists()
        yield {"corpus": added.corpus_id, "run": added.run_id, "small": small.id}


def open_page(corpus_id: int, page: str | None, **state: Any) -> AppTest:
    """The app (``app.py``) on ``corpus_id``, switched to ``page`` (None: Home), with ``state`` in the session."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    if page is not None:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


PAGES = [None, "pages/1_Corpus_Import.py", "pages/2_Annotate_and_Review.py", "pages/3_Agreement_and_Export.py",
         "pages/4_Index.py", "pages/5_Compare.py", "pages/6_Attention.py", "pages/7_Maps.py",
         "pages/8_Query_Builder.py", "pages/9_Evaluation_Runs.py", "pages/10_Reader.py"]


@pytest.mark.parametrize("page", PAGES)
def test_no_page_draws_hostile_names_as_markup(hostile, page):
    """Each page, opened on the hostile corpus, shows the names (several of them on each page) verbatim."""
    at = open_page(hostile["corpus"], page)
    sources = [src for _, src, _ in markdown_sources(at)]
    assert injections(at) == []
    if page not in (None, "pages/1_Corpus_Import.py"):  # Home and Import name no corpus data
        assert any("evil" in s for s in sources + _all_labels(at)), "no hostile name on the page: nothing tested"


def _all_labels(at: AppTest) -> list[str]:
    """Select box options and values of the page (plain text, where the names are shown in full)."""
    return [str(o) for n in _nodes(at._tree) if getattr(n, "type", "") in ("selectbox", "multiselect")
            for o in n.options]


def test_the_checker_sees_an_unescaped_name() -> None:
    """The check itself: the hostile string drawn unescaped is caught four ways; through md_plain, not at all;
    and inside an HTML block that escapes it (ui.render.text_block), not at all."""
    from ui.render import md_plain, text_block

    assert injected(drawn(f"Saved {HOSTILE}", allow_html=True)) == ["bold", "link", "image", "onerror"]
    assert injected(drawn(f"Saved {HOSTILE}", allow_html=False)) == ["bold", "link", "image"]
    assert injected(drawn(f"Saved {md_plain(HOSTILE)}", allow_html=False)) == []
    assert injected(drawn(text_block(HOSTILE), allow_html=True)) == []


def test_evaluation_runs_views_show_the_run_and_query_verbatim(hostile):
    """The Runs tab (the named run viewed) and Compare runs (two strategies of it, with the query's text in its
    HTML block) draw no markup from the names or the query."""
    at = open_page(hostile["corpus"], "pages/9_Evaluation_Runs.py", ev_view_run=hostile["run"])
    assert any("Run **x**" in o for o in _all_labels(at))  # the run is listed by its name
    assert injections(at) == []
    html_blocks = [m.value for m in at.markdown if m.proto.allow_html]
    assert html_blocks and all("<img" not in b for b in html_blocks)


def test_evaluation_refusal_names_the_corpus_verbatim(hostile):
    """'Run evaluation' on a one-document corpus is refused with a message naming the corpus: it was drawn as
    Markdown (the corpus name's link and image with it). (The page is opened on its own here: a click on a page
    reached through ``switch_page`` did not reach it in AppTest.)"""
    from ui.render import md_plain

    at = AppTest.from_file(str(ROOT / "pages" / "9_Evaluation_Runs.py"), default_timeout=60)
    at.session_state["corpus_id"] = hostile["small"]
    at.run()
    at.button(key="ev_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    name = f"Small {HOSTILE}"
    assert errors == [md_plain(f"corpus {name!r} has 1 document(s); at least 2 are needed")]
    assert injections(at) == []


def test_reader_answer_with_markup_is_shown_as_text(hostile, monkeypatch):
    """The Reader page's LLM answer and the model name the endpoint reports carry the hostile markup: both are
    shown as text (the answer in an HTML block that escapes it)."""
    answer = f"Cats purr in 1905. {HOSTILE}\n\nSecond paragraph <script>alert(2)</script>"
    with FakeOpenAIServer(lambda body: Reply.ok(answer, model=f"m {HOSTILE}")) as server:
        server.set_env(monkeypatch)
        at = AppTest.from_file(str(ROOT / "pages" / "10_Reader.py"), default_timeout=60)
        at.session_state["corpus_id"] = hostile["corpus"]
        at.run().button(key="reader_go").click().run()
        assert not at.exception, [e.value for e in at.exception]
        assert server.requests, "no answer was asked for"
    assert not at.error, [e.value for e in at.error]
    shown = [m.value for m in at.markdown if m.proto.allow_html and "Cats purr" in m.value]
    assert len(shown) == 2  # one answer per side
    assert all("&lt;script&gt;" in s and "<script>" not in s for s in shown)
    assert any("m \\*\\*x\\*\\*" in c.value for c in at.caption)  # the reported model name, escaped
    assert injections(at) == []


def test_ignored_llm_settings_are_named_verbatim(hostile, monkeypatch):
    """A setting that cannot be read (here a timeout holding the markup) is named in the 'settings ignored'
    warning as text: settings come from the environment or secrets, not from the user's data, but a value is
    still shown as it was written."""
    monkeypatch.setenv("MRAG_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MRAG_LLM_MODEL", "m")
    monkeypatch.setenv("MRAG_LLM_TIMEOUT", HOSTILE)
    at = open_page(hostile["corpus"], "pages/10_Reader.py")
    warned = [w.value for w in at.warning if "LLM endpoint settings ignored" in w.value]
    assert warned and all("\\*\\*x\\*\\*" in w for w in warned), warned
    assert injections(at) == []
