"""The review queue in a real browser, driven by its keyboard shortcuts only: Alt+S skips to the
next document, Alt+N saves the chosen label and moves on; the decision is in the database."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, wait_idle

pytestmark = pytest.mark.browser

POSITION = re.compile(r"^Document (\d+) of (\d+) in the queue · id (\d+) ·")


def _position(page, n: int) -> int:
    """Wait for the queue to show its ``n``-th document with its buttons and the script run to end;
    that document's id."""
    caption = page.get_by_text(re.compile(rf"^Document {n} of \d+ in the queue · id \d+ ·"))
    caption.wait_for(timeout=30_000)
    page.get_by_role("button", name=re.compile("^Skip")).wait_for()
    wait_idle(page)
    return int(POSITION.match(caption.inner_text()).group(3))


def test_review_queue_by_keyboard(app_instance, browser_page):
    import db

    page = browser_page
    page.set_default_timeout(120_000)
    page.goto(f"{app_instance.url}/Annotate_and_Review")
    page.locator('[data-testid="stRadioOption"]').filter(has_text="Review queue").click()
    page.get_by_text(POSITION).wait_for(timeout=180_000)
    first = _position(page, 1)
    store = db.open_store(f"sqlite:///{app_instance.folder / 't.db'}")
    first_decisions = len(db.list_decisions(store, first))

    page.locator("h3").first.click()  # focus the page (the title), not a field
    page.keyboard.press("Alt+s")
    second = _position(page, 2)
    assert second != first
    second_decisions = len(db.list_decisions(store, second))  # the demo import's label

    page.keyboard.press("Alt+n")
    page.get_by_text(re.compile(r"^Saved '.+' for '")).wait_for()
    assert _position(page, 3) not in (first, second)
    page.screenshot(path=str(ARTIFACTS / "browser_review.png"), full_page=True)

    assert len(db.list_decisions(store, first)) == first_decisions  # skipped: nothing saved
    decisions = db.list_decisions(store, second)
    assert len(decisions) == second_decisions + 1
    assert decisions[-1].annotator == "reviewer"


def test_preannotation_cancelled_mid_run_then_resumed(app_instance, browser_page):
    """Cancel stops the offline pre-annotation of the demo corpus after a stored batch; Resume does the rest."""
    import db
    from services.demo import DEMO_CORPUS_NAME
    from services.workflows.annotation import zero_shot_identity
    from ui.corpus_widgets import ZERO_SHOT_MODEL

    page = browser_page
    page.set_default_timeout(120_000)
    page.goto(f"{app_instance.url}/Annotate_and_Review")
    page.locator('[data-testid="stRadioOption"]').filter(has_text="Pre-annotate").click()
    batch = page.get_by_label("Batch size (stored after each batch)")
    batch.fill("1")  # one document per batch: the run lasts long enough to be cancelled
    batch.press("Enter")
    page.wait_for_timeout(200)  # the rerun the Enter key starts (wait_idle waits 300 ms more)
    wait_idle(page)
    page.get_by_role("button", name="Start pre-annotation").click()
    page.get_by_text(re.compile(r"^[1-9]\d* / \d+ documents annotated$")).wait_for(timeout=180_000)  # model loaded
    page.get_by_role("button", name="Cancel").click()
    page.get_by_text("Pre-annotation cancelled; every finished batch is kept.", exact=False).wait_for(timeout=60_000)

    store = db.open_store(f"sqlite:///{app_instance.folder / 't.db'}")
    corpus = db.get_corpus_by_name(store, DEMO_CORPUS_NAME)
    agent, version = zero_shot_identity(ZERO_SHOT_MODEL)
    left = len(db.documents_without_suggestion(store, corpus.id, agent, version))
    assert 0 < left < corpus.n_documents  # stopped part-way, the finished batches stored
    page.get_by_role("button", name=f"Resume ({left} left)").wait_for()  # the count after the stopped batch

    batch.fill("32")
    batch.press("Enter")
    page.wait_for_timeout(200)  # the rerun the Enter key starts (wait_idle waits 300 ms more)
    wait_idle(page)
    page.get_by_role("button", name=f"Resume ({left} left)").click()
    page.get_by_text(re.compile(r"^Pre-annotation finished: ")).wait_for(timeout=180_000)
    assert db.documents_without_suggestion(store, corpus.id, agent, version) == []
    assert page.get_by_text("Pre-annotation cancelled").count() == 0


def test_edit_expander_stays_open_after_saving(app_instance, browser_page):
    """Saving a corrected title shows a message above the document; the 'Edit or delete' expander it was saved
    from stays open (an unkeyed expander was rebuilt closed, so every correction needed it reopened)."""
    import db

    page = browser_page
    page.set_default_timeout(120_000)
    page.goto(f"{app_instance.url}/Annotate_and_Review")
    page.locator('[data-testid="stRadioOption"]').filter(has_text="Review queue").click()
    doc_id = _position(page, 1)
    page.locator('[data-testid="stExpander"] summary').filter(has_text="Edit or delete this document").click()
    title = page.get_by_label("Title", exact=True)
    title.wait_for()
    wait_idle(page)
    title.fill("A corrected title")
    page.get_by_role("button", name="Save changes").click()
    page.get_by_text("Renamed to 'A corrected title'.").wait_for()
    wait_idle(page)
    assert page.get_by_label("Title", exact=True).is_visible()  # still open
    page.screenshot(path=str(ARTIFACTS / "browser_review_edit.png"), full_page=True)
    store = db.open_store(f"sqlite:///{app_instance.folder / 't.db'}")
    assert db.get_document(store, doc_id).title == "A corrected title"
    store.close()
