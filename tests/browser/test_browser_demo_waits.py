"""The demo path's waits in a real browser (issue 36): a model-backed page opened first on a fresh server says what
it is loading instead of leaving its main area blank; the demo index built on the Index page gets its UMAP maps in
the background, Maps says so (with PCA meanwhile) and switches to UMAP by itself once they are stored, and opens on
UMAP from then on.

Behaviour, not speed: bench/demo_waits.py measures the waits. The one bound here is the pause between two spinners
(``st.spinner`` shows 0.5 s after its wait starts; the page's opening, the model's load and the maps' drawing send
theirs at once, ``ui/spinners.py``): the main area never stays silent longer than a few seconds once the page has
started to draw, where it stayed blank for 13-38 s before.
"""

from __future__ import annotations

import time

import pytest

from tests.browser.conftest import wait_idle
from tests.support.main_area import watch

# timing-bound (first-open waits measured in seconds, ~80 s): run with -m slow, as bench/demo_waits.py measures
pytestmark = [pytest.mark.browser, pytest.mark.slow]

BUILD_BUTTON = "[...m.querySelectorAll('button')].some(b => b.innerText.trim() === 'Build index')"
SILENT_S = 3.0  # the most the main area may stay without a spinner or content once something is drawn


def method_shown(page) -> str:  # noqa: ANN001
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text("Method", exact=True))
    return box.locator("input").input_value()


def test_demo_first_open_says_what_loads_and_maps_opens_on_umap(app_instance, browser_page):
    page = browser_page
    page.set_default_timeout(120_000)
    t0 = time.perf_counter()
    page.goto(f"{app_instance.url}/Index", wait_until="commit")
    waits = watch(page, "Index", BUILD_BUTTON, 240, t0)
    assert waits.content is not None, f"the Index page did not open: {waits}"
    # A first open on a fresh server: the page's libraries and the model load; spinners say so.
    assert waits.said and set(waits.said) <= {"Opening Index…", "Loading the demo corpus...", "Opening the database...",
                                              *(s for s in waits.said if s.startswith("Loading the model minilm"))}
    assert waits.said[0] == "Opening Index…", waits.said
    assert waits.blank_after_shown < SILENT_S, waits
    wait_idle(page)

    page.get_by_role("button", name="Build index").click()
    page.get_by_text("is ready").first.wait_for(timeout=300_000)
    page.get_by_text("Its UMAP maps are being computed in the background").wait_for()

    # Maps, while the maps are computed: PCA drawn, the progress said
    page.get_by_role("link", name="Maps").click()
    page.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
    bar = page.locator('[data-testid="stProgress"]').filter(has_text="being computed in the background")
    if method_shown(page) != "UMAP":  # (on a fast machine they may be done already)
        assert method_shown(page) == "PCA (fast)"
        bar.wait_for()
        assert "PCA maps are shown meanwhile" in bar.inner_text()
        # ... and the page switches to UMAP by itself once they are stored
        page.wait_for_function(
            """() => [...document.querySelectorAll('[data-testid="stSelectbox"]')].some(e =>
                 (e.querySelector('[data-testid="stWidgetLabel"]')?.innerText || '').trim() === 'Method'
                 && e.querySelector('input')?.value === 'UMAP')""", timeout=600_000)
    wait_idle(page)
    assert method_shown(page) == "UMAP" and bar.count() == 0
    assert page.locator('[data-testid="stPlotlyChart"] .main-svg').count() >= 1

    page.reload()  # a new session opens on UMAP, with nothing to compute
    page.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
    wait_idle(page)
    assert method_shown(page) == "UMAP" and bar.count() == 0
    assert page.locator('[data-testid="stException"]').count() == 0
