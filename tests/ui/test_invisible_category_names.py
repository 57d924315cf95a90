"""Annotate and Review: categories that differ only by an invisible character ('physics' and 'phys\\u200bics', stored
before imports folded them into one) are pointed at as a clash, as 'Physics' and 'physics' are, and the rename
expander opens on the second so they can be merged. The page compared names by case and spacing only, and said
nothing, while pre-annotation (which uses the label key) refused the corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import db
from tests.support.apptest import no_exceptions, page_store
from ui.render import md_plain

REVIEW_PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "2_Annotate_and_Review.py")
pytestmark = pytest.mark.usefixtures("fresh_env")  # tests/ui/conftest.py
HIDDEN = "phys\u200bics"


def test_categories_differing_by_an_invisible_character_are_shown_as_a_clash() -> None:
    store = page_store()
    corpus = db.create_corpus(store, "Sci")
    db.add_documents(store, corpus.id, [{"title": "Electrons", "text": "Electrons orbit.", "label": "physics"},
                                        {"title": "Photons", "text": "Photons travel.", "label": HIDDEN}])
    store.close()
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus.id
    at.run()
    at.radio(key="ar_view").set_value("Pre-annotate").run()
    no_exceptions(at)
    assert [w.value for w in at.warning if w.value.startswith("Categories that differ")] == [
        f"Categories that differ only in case or spacing: 'physics' and '{md_plain(HIDDEN)}'. Pre-annotation cannot "
        "tell them apart: merge them below (rename one to the other's name)."]
    pick = next(w for w in at.selectbox if w.key and w.key.startswith("ar_cat_pick_"))
    assert pick.value == HIDDEN
