"""Two annotators label one corpus blind, each in a browser context of their own, at the same time; the Agreement
page then shows their Cohen's kappa (and a disagreement is adjudicated there)."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, wait_idle

pytestmark = pytest.mark.browser

CORPUS = "A team corpus"  # sorts before the demo corpus: every page opens on it
NAME_BOX = "Your name (stored with each decision)"
# six documents, labelled so that Cohen's kappa is 0.5 (computed by hand in tests/services/annotate)
LABELS = {
    "alice": ["sport", "sport", "politics", "politics", "science", "science"],
    "bob": ["sport", "politics", "politics", "politics", "science", "sport"],
}


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("Chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def _open(browser, url: str, path: str, name: str):
    """A page of its own browser context (its own Streamlit session) on ``path``, signed in as ``name``."""
    page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
    page.set_default_timeout(120_000)
    page.goto(f"{url}/{path}")
    page.get_by_label(NAME_BOX, exact=True).wait_for(timeout=180_000)  # the first page open loads the demo corpus
    wait_idle(page, 180_000)
    box = page.get_by_label(NAME_BOX, exact=True)
    box.fill(name)
    box.press("Enter")
    page.wait_for_timeout(200)
    wait_idle(page)
    return page


def _queue_position(page, n: int) -> None:
    page.get_by_text(re.compile(rf"^Document {n} of 6 in the queue · id \d+ ·")).wait_for()
    page.get_by_role("button", name=re.compile("^Save & Next")).wait_for()
    wait_idle(page)


def _label_current(page, label: str, n: int) -> None:
    """Choose ``label`` for the ``n``-th document of the queue and press Save & Next."""
    _queue_position(page, n)
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text("Label", exact=True))
    box.locator("input").first.click()
    page.get_by_role("option", name=label, exact=True).first.click()
    page.keyboard.press("Escape")
    page.get_by_role("button", name=re.compile("^Save & Next")).click()
    page.get_by_text(re.compile(rf"^Saved '{label}' for 'Doc {n - 1}'")).wait_for()
    wait_idle(page)


def test_two_annotators_label_one_corpus_blind_and_their_kappa_is_shown(app_instance, browser):
    import db

    store = db.open_store(f"sqlite:///{app_instance.folder / 't.db'}")
    corpus = db.create_corpus(store, CORPUS)
    db.add_categories(store, corpus.id, ["sport", "politics", "science"])
    ids = db.add_documents(store, corpus.id, [{"title": f"Doc {i}", "text": f"The text of document {i}."}
                                              for i in range(6)]).document_ids

    lead = _open(browser, app_instance.url, "Agreement_and_Export", "lead")
    lead.get_by_label("Annotators, one per line").fill("alice\nbob")
    overlap = lead.get_by_label("Documents labelled by several annotators (%)")
    overlap.fill("100")
    lead.get_by_role("button", name="Save team and assign documents").click()
    lead.get_by_text("Saved the team (alice, bob). Assigned 6 documents (6 to 2 annotators each)",
                     exact=False).wait_for()
    assert db.get_team(store, corpus.id).n_shared == 6

    pages = {}
    for name in LABELS:
        page = _open(browser, app_instance.url, "Annotate_and_Review", name)
        page.locator('[data-testid="stRadioOption"]').filter(has_text="Review queue").click()
        page.get_by_text(f"Blind annotation: you are '{name}'", exact=False).wait_for()
        pages[name] = page
    for n in range(1, 7):  # in turns, both on the same document at once: a colleague's label never conflicts
        for name, page in pages.items():
            _queue_position(page, n)
            if name == "bob":  # alice labelled this document a moment ago: bob sees none of it
                assert page.get_by_text("Your label: none yet").count() == 1
                assert "alice" not in page.locator('[data-testid="stMain"]').inner_text()
            _label_current(page, LABELS[name][n - 1], n)
    pages["bob"].screenshot(path=str(ARTIFACTS / "browser_team_blind_review.png"), full_page=True)
    for name, labels in LABELS.items():
        mine = [[x for x in db.list_decisions(store, d) if x.annotator == name] for d in ids]
        assert [(x[-1].category, x[-1].blind) for x in mine] == [(label, True) for label in labels]

    lead.reload()  # a new session: the lead types their name again
    lead.get_by_text("Agreement between annotators").wait_for(timeout=60_000)
    wait_idle(lead)
    lead.get_by_label(NAME_BOX, exact=True).fill("lead")
    lead.get_by_label(NAME_BOX, exact=True).press("Enter")
    lead.wait_for_timeout(200)
    wait_idle(lead)
    kappa = lead.locator('[data-testid="stMetric"]').filter(has_text="Cohen's κ")
    assert kappa.locator('[data-testid="stMetricValue"]').inner_text().strip() == "0.500"
    lead.get_by_text("over 6 documents both labelled", exact=False).first.wait_for()
    compared = lead.locator('[data-testid="stMetric"]').filter(has_text="Documents compared").first
    assert compared.locator('[data-testid="stMetricValue"]').inner_text().strip() == "6"
    lead.screenshot(path=str(ARTIFACTS / "browser_team_agreement.png"), full_page=True)

    # the lead adjudicates the first disagreement (Doc 1: alice sport, bob politics) as politics
    lead.get_by_text("Document to adjudicate", exact=True).wait_for()
    final = lead.locator('[data-testid="stSelectbox"]').filter(has=lead.get_by_text("Final label", exact=True))
    final.locator("input").first.click()
    lead.keyboard.type("politics")
    lead.keyboard.press("Enter")
    wait_idle(lead)
    lead.screenshot(path=str(ARTIFACTS / "browser_team_adjudicate.png"), full_page=True)
    lead.get_by_role("button", name="Adjudicate", exact=True).click()
    lead.get_by_text("Adjudicated 'Doc 1': its label is 'politics' now (by 'lead').", exact=False).wait_for()
    last = db.list_decisions(store, ids[1])[-1]
    assert (last.annotator, last.method, last.category) == ("lead", "adjudication", "politics")
    assert db.get_document(store, ids[1]).label == "politics"
    store.close()
