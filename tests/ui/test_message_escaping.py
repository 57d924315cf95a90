"""QA: data shown inside Streamlit messages (rendered as Markdown) is escaped, so a label, title or name holding
Markdown shows verbatim: no link, no image fetched from elsewhere. AppTest on a fresh store (``fresh_env``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.render import md_plain

ROOT = Path(__file__).resolve().parents[2]
IMPORT_PAGE = str(ROOT / "pages" / "1_Corpus_Import.py")

pytestmark = pytest.mark.usefixtures("fresh_env")

LINK_LABEL = "[click me](http://evil.example) **bold**"
IMAGE_LABEL = "![img](http://evil.example/x.png)"


def test_import_preview_label_counts_are_escaped() -> None:
    """The preview's 'Labels:' caption showed a label '![img](http://...)' as an image (fetched from that address)
    and '[click me](...)' as a link."""
    at = AppTest.from_file(IMPORT_PAGE, default_timeout=60).run()
    data = (f'title,text,label\nA,alpha text here,"{LINK_LABEL}"\nB,beta text here,"{IMAGE_LABEL}"\n').encode()
    at.file_uploader(key="imp_upload_table").set_value(("labels.csv", data, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption if c.value.startswith("Labels:")]
    assert captions == [f"Labels: {md_plain(IMAGE_LABEL)}: 1, {md_plain(LINK_LABEL)}: 1"]


REVIEW_PAGE = str(ROOT / "pages" / "2_Annotate_and_Review.py")
MD_TITLE = "New *title* [x](http://evil.example)"
MD_LABEL = "**loud** [lab](http://evil.example)"


def _md_corpus() -> tuple[int, int]:
    """A corpus whose one document's title and one category's name hold Markdown; (corpus id, document id)."""
    import os

    import db

    store = db.open_store(os.environ["MRAG_DATABASE_URL"])
    c = db.create_corpus(store, "Markdown names")
    db.add_categories(store, c.id, [MD_LABEL])
    doc_id = db.add_documents(store, c.id, [{"title": MD_TITLE, "text": "Some text."}]).document_ids[0]
    return c.id, doc_id


def test_review_save_message_escapes_title_and_label() -> None:
    """'Save & Next' said "Saved '<label>' for '<title>'" with both drawn as Markdown: a title
    'New *title* [x](...)' read 'New title x' in italics with a link."""
    corpus_id, doc_id = _md_corpus()
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    at.radio(key="ar_view").set_value("Review queue").run()
    at.selectbox(key=f"rv_label_{doc_id}").set_value(MD_LABEL)
    next(b for b in at.button if b.label == "Save & Next").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [s.value for s in at.success] == [f"Saved '{md_plain(MD_LABEL)}' for '{md_plain(MD_TITLE)}'."]


def test_find_similar_label_message_escapes_the_label() -> None:
    """'Apply label to selected' said "Labelled 1 document(s) '<label>'" with the label drawn as Markdown."""
    corpus_id, _ = _md_corpus()
    at = AppTest.from_file(REVIEW_PAGE, default_timeout=60)
    at.session_state["corpus_id"] = corpus_id
    at.run()
    at.radio(key="ar_view").set_value("Find similar").run()
    at.toggle(key="fs_on").set_value(True).run()
    at.selectbox(key="fs_label").set_value(MD_LABEL)
    next(b for b in at.button if b.label == "Apply label to selected").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [s.value for s in at.success] == [f"Labelled 1 document(s) '{md_plain(MD_LABEL)}'."]
