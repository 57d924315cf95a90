"""Security in a real browser: names and texts from the data never become live DOM.

The app's database is filled, before the browser opens any page, with a corpus whose name, categories, document
titles and texts, suggestion agent, query set, query and evaluation run carry raw HTML (an ``<img onerror>``, a
``<script>``, an ``<a href>``, an ``<iframe>``) and Markdown (bold, a ``javascript:`` link); it has an index (MiniLM,
the model the other browser tests use) and a named evaluation run. Every page is then opened in Chromium on that
corpus, and after its script run has finished the DOM (every frame) must hold no element made from the data: no
``img[src="x"]``, no ``iframe`` or link to evil.example, no ``javascript:`` link, no ``<strong>`` of the data's bold,
and ``window.__pwned`` (which each payload would set) is undefined. The payloads must be shown as text on the pages
that show the data, so the test fails when a page is never reached or shows nothing of it.

A URL in a name shown in a Markdown message (``<a href="http://evil.example/">`` in a category) became a live link
even backslash-escaped: Streamlit's renderer links plain URLs (GFM autolink literals) after reading the escapes;
``ui.render.md_plain`` now puts an invisible word joiner into it. With ``md_plain`` returning its input, the bold of
the data is drawn (Corpus Import, Annotate and Review, Query Builder fail); with ``ui.render.escape`` returning its
input, the review queue's text draws the ``<img>`` and Compare and Evaluation Runs the links.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, wait_idle, wait_until
from tests.support.hostile import TEXTS, add_hostile_corpus

pytestmark = pytest.mark.browser

IMG = '<img src=x onerror="window.__pwned=1">'
SCRIPT = "<script>window.__pwned=2</script>"
JS_LINK = "[click](javascript:window.__pwned=3)"
BOLD = "**bold**"
LINK = '<a href="http://evil.example/">a</a>'
IFRAME = '<iframe src="http://evil.example/">'
HOSTILE = f"{IMG} {SCRIPT} {JS_LINK} {BOLD} {LINK} {IFRAME}"
"""Every payload: set into document titles and texts, the query and the evaluation run's name."""
NAME = f"{IMG} {JS_LINK} {BOLD} {LINK}"
"""A shorter mix for names kept to 200 characters (corpus, categories, query set, agent)."""

#: Elements made from the payloads (``*|href``: an SVG link's ``xlink:href`` too, as Plotly draws ``<a>``).
FORBIDDEN = ['img[src="x"]', 'iframe[src*="evil.example"]', 'a[*|href^="javascript:"]', 'a[*|href*="evil.example"]']

PROBE = """(selectors) => {
  const found = {};
  const note = (key, elements) => {
    if (elements.length) {
      found[key] = [elements.length, (elements[0].parentElement || elements[0]).outerHTML.slice(0, 300)];
    }
  };
  for (const s of selectors) note(s, [...document.querySelectorAll(s)]);
  note('inline <script> of the data', [...document.scripts].filter(e => e.textContent.includes('__pwned')));
  const strong = [...document.querySelectorAll('strong, b')];
  note('<strong>/<b> of the data', strong.filter(e => e.textContent.trim() === 'bold'));
  if (typeof window.__pwned !== 'undefined') found['window.__pwned'] = [window.__pwned, ''];
  return found;
}"""
"""For one frame: what of the payloads is live there, as {check: [count, the first element's parent's HTML]}."""

SHOWN = """() => document.body.innerText + '\\n' +
  [...document.querySelectorAll('input, textarea')].map(e => e.value).join('\\n')"""
"""The text a reader sees in a frame: the rendered text plus the values of inputs and text areas (a select box's
chosen option, a disabled query text)."""


@pytest.fixture(scope="module")
def hostile_app(app_instance) -> Iterator[Any]:
    """:func:`app_instance` with its database (not opened by the app yet: no page was visited) holding the hostile
    corpus (its name sorts before the demo corpus', so every page opens on it), an index of it and a named
    evaluation run of its query set."""
    import torch

    import db

    torch.set_num_threads(1)
    store = db.open_store(f"sqlite:///{app_instance.folder / 't.db'}")
    try:
        add_hostile_corpus(store, NAME, HOSTILE)
    finally:
        store.close()
    yield app_instance


def live_payloads(page) -> dict[str, Any]:
    """What of the payloads became live DOM in any frame of ``page`` (:data:`PROBE`); empty when nothing did."""
    found: dict[str, Any] = {}
    for frame in page.frames:
        for key, value in frame.evaluate(PROBE, FORBIDDEN).items():
            found[f"{frame.url}: {key}"] = value
    return found


def shown_text(page) -> str:
    """All the text ``page`` shows, in every frame (:data:`SHOWN`)."""
    return "\n".join(frame.evaluate(SHOWN) for frame in page.frames)


def _review_queue(page) -> None:
    page.locator('[data-testid="stRadioOption"]').filter(has_text="Review queue").click()
    page.get_by_text(re.compile(r"^Document 1 of \d+ in the queue")).wait_for()


def _manage_corpora(page) -> None:
    page.locator('[data-testid="stExpander"] summary').filter(has_text="Manage corpora").click()


def _reader(page) -> None:
    page.get_by_text("Press Generate answers", exact=False).first.wait_for()


def _compare(page) -> None:
    page.get_by_role("button", name="Compare", exact=True).click()
    page.get_by_text("Why MRAG returned these documents").wait_for(timeout=120_000)


def _charts(n: int):
    """An action: wait until the page has drawn ``n`` Plotly charts."""
    def wait(page) -> None:
        page.locator('[data-testid="stPlotlyChart"] .main-svg').nth(n - 1).wait_for()
    return wait


def _tab(name: str):
    """An action: open the tab ``name``."""
    def open_tab(page) -> None:
        page.get_by_role("tab", name=name, exact=True).click()
    return open_tab


TITLE = f"Title {IMG} {SCRIPT} {JS_LINK}"
QUERY = f"how do glaciers move? {HOSTILE}"
CORPUS = f"Corpus {IMG}"
NAME_START = f"{IMG} {JS_LINK} {BOLD}"
"""The start of :data:`NAME`, before its URL (where the Markdown of a message keeps a URL from becoming a link, it
holds an invisible word joiner: ``ui.render.md_plain``)."""

# (URL path, page title, what to do there before checking, texts the page must show)
PAGES = [
    ("", "MRAG Studio", None, []),
    ("Corpus_Import", "Corpus Import", _manage_corpora, [CORPUS]),
    ("Annotate_and_Review", "Annotate and Review", _review_queue, [TITLE, f"Current label: cats {NAME_START}",
                                                                     f"{TEXTS[0]} {HOSTILE}"]),
    ("Agreement_and_Export", "Agreement and Export", _charts(1), [CORPUS, f"cats {IMG}", f"earth {IMG}"]),
    ("Index", "Index", None, [CORPUS]),
    ("Compare", "Compare", _compare, [QUERY, f"cats {NAME_START}", f"Title {IMG[:10]}"]),
    ("Attention", "Attention", _charts(2), [TITLE]),
    ("Maps", "Maps", _charts(1), [CORPUS]),
    ("Query_Builder", "Query Builder", _tab("Review & export"), [f"Set {NAME_START}", QUERY]),
    ("Evaluation_Runs", "Evaluation Runs", _tab("Runs"), [f"Run {IMG} {SCRIPT}"]),
    ("Reader", "Reader", _reader, [CORPUS]),
]


@pytest.mark.parametrize(("path", "title", "action", "texts"), PAGES, ids=[p[1] for p in PAGES])
def test_page_shows_hostile_data_as_text(hostile_app, browser_page, path, title, action, texts):
    """The page, opened on the hostile corpus, shows the payloads as text and none of them as live DOM."""
    page = browser_page
    page.set_default_timeout(60_000)
    page.goto(f"{hostile_app.url}/{path}")
    page.locator("h1").filter(has_text=title).wait_for(timeout=180_000)  # the first page loads the demo corpus
    wait_idle(page)
    if action is not None:
        action(page)
        wait_idle(page)
    # the texts are read until all are shown (a box can be drawn a moment after the run is seen to end under load),
    # and the DOM is checked after that, with the data on the page
    text = wait_until(lambda: shown_text(page), lambda shown: all(t in shown for t in texts))
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"browser_hostile_{path or 'Home'}.png"), full_page=True)
    assert page.locator(".stException").count() == 0
    assert live_payloads(page) == {}
    (ARTIFACTS / f"browser_hostile_{path or 'Home'}.txt").write_text(text)
    missing = [t for t in texts if t not in text]
    assert not missing, f"not shown as text on {title}: {missing}"
