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
