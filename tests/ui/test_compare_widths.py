"""Compare's column widths: a result list's title takes the room its titles need (two lists to a row share some
400 px of a 1280 px window), and the titles its column still cuts are named in full, escaped, under the list; a
list of short titles leaves the category its room. The MRAG evidence table's columns add up to less than the page's
width at 1280 px, so the score stays in view, and the head lists its heads column cuts are named in full under it.

Widths are read from the page's column configuration (what Streamlit sends the browser); the browser test
tests/browser/test_browser_compare_long_categories.py checks the same in Chromium."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.support.compare_pages import compare, indexed_corpus  # noqa: E402
from ui.compare_layout import HEADS_COLUMN as HEADS  # noqa: E402
from ui.compare_layout import _score_extra_px, score_decimals  # noqa: E402
from ui.render import full_names_html  # noqa: E402

# 45 characters each (44 with the blank line as one space), holding HTML and Markdown that must not be drawn
MARKUP_TITLES = [f"<i>Bergen</i> & **shipyard**\n\nledger, vol. {i:02d}" for i in range(6)]


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    from tests.support.tiny_models import tiny_gpt2_folder

    return tiny_gpt2_folder(tmp_path / "gpt2", n_layer=2)


def _widths(frame) -> dict[str, int]:  # noqa: ANN001 - an AppTest Dataframe
    """The column widths (px) the page configured for a table, by column name."""
    return {name: cfg["width"] for name, cfg in json.loads(frame.proto.columns).items() if "width" in cfg}


LIST_COLUMNS = ["rank", "mark", "title", "category", "score"]


def _list_columns(at: AppTest) -> list:
    """The page columns that hold a result list, in the page's order."""
    return [c for c in at.columns if any(list(d.value.columns) == LIST_COLUMNS for d in c.dataframe)]


def _lists(at: AppTest) -> list:
    return [d for c in _list_columns(at) for d in c.dataframe]


def _blocks(captions, heading: str) -> list[str]:  # noqa: ANN001 - an AppTest ElementList of captions
    """The full-name blocks (:func:`ui.render.full_names_html`) among ``captions`` that ``heading`` opens."""
    return [c.value for c in captions if c.value.startswith("<div class='full-names'") and f">{heading}: " in c.value]


def _list_blocks(at: AppTest, heading: str) -> list[str]:
    """The full-name blocks that ``heading`` opens under the result lists, in the lists' order."""
    return [b for c in _list_columns(at) for b in _blocks(c.caption, heading)]


def _evidence_blocks(at: AppTest, heading: str) -> list[str]:
    """The full-name blocks that ``heading`` opens under the MRAG evidence table (after its caption)."""
    values = [c.value for c in at.caption]
    start = next(i for i, v in enumerate(values) if v.startswith("Each head searches its own space"))
    return _blocks(at.caption[start:], heading)


@pytest.mark.usefixtures("fresh_env")
def test_two_per_row_lists_give_long_titles_the_room_and_name_them_whole_under_the_list(
        tiny_model: Path) -> None:
    """Two lists to a row cut titles after some 24 characters (a 164 px title column) while the category kept
    90 px; nothing named them whole. Titles with markup are named escaped, a blank line in one as a space."""
    corpus_id = indexed_corpus("Long titles", MARKUP_TITLES, ["cats", "sea", "tea"] * 2, tiny_model)
    at = compare(corpus_id)  # two lists to a row is the default
    lists = _lists(at)
    assert len(lists) == 5
    for frame in lists:
        # a 45-character title needs 45 x 7.5 + 17 = 354.5 px, more than the 252 of title and category: the title
        # gets all but the category's least 60 px ("cats" needs 4 x 7.5 + 17 = 47); 28 + 70 + 192 + 60 + 48 = 398
        # (a list two to a row in a 1280 px window is 400 px inside its border)
        extra = _score_extra_px(score_decimals(frame.value["score"]))  # Fusion's RRF scores: 4 decimals, 8 px
        assert _widths(frame) == {"rank": 28, "mark": 70, "title": 192 - extra, "category": 60, "score": 48 + extra}
    titles = [frame.value["title"].tolist() for frame in lists]
    assert all(len(t) == 2 and set(t) <= set(MARKUP_TITLES) for t in titles)  # k = 2 aspects
    expected = [full_names_html("Titles", [(" ".join(first.split()), [1]), (" ".join(second.split()), [2])])
                for first, second in titles]
    assert _list_blocks(at, "Titles") == expected  # one under each list, in the lists' order
    for block in expected:  # escaped, and one HTML block: Streamlit's Markdown passes it through untouched
        assert "<i>" not in block and "&lt;i&gt;Bergen&lt;/i&gt; &amp; **shipyard** ledger, vol. 0" in block
        assert MarkdownIt("commonmark").render(block).strip() == block
    assert _list_blocks(at, "Categories") == []  # cats, sea and tea fit in 60 px

    per_doc = next(d for d in at.dataframe if HEADS in d.value.columns)
    # the evidence table gives a title at most 260 px: MRAG's two are named whole under it
    widths = _widths(per_doc)
    assert widths["title"] == 260 and sum(widths.values()) == 808, widths
    first, second = per_doc.value["title"].tolist()
    assert _evidence_blocks(at, "Titles") == [
        full_names_html("Titles", [(" ".join(first.split()), [1]), (" ".join(second.split()), [2])])]


@pytest.mark.usefixtures("fresh_env")
def test_two_per_row_lists_of_short_titles_keep_the_category_its_room(tiny_model: Path) -> None:
    """The title takes the room only where its titles need it: a list of short titles keeps the title's least
    164 px and leaves the category 88, enough for 9 characters (9 x 7.5 + 17 = 84.5 px; 60 px would cut them)."""
    labels = ["volcanoes", "spaceship"] * 3
    corpus_id = indexed_corpus("Short titles", [f"Ledger {i}" for i in range(6)], labels, tiny_model)
    at = compare(corpus_id)
    lists = _lists(at)
    assert len(lists) == 5
    narrowed = 0
    for frame in lists:  # "Ledger 0" needs 8 x 7.5 + 17 = 77 px
        extra = _score_extra_px(score_decimals(frame.value["score"]))  # Fusion's RRF scores: 4 decimals, 8 px
        assert _widths(frame) == {"rank": 28, "mark": 70, "title": 164, "category": 88 - extra, "score": 48 + extra}
        narrowed += extra > 0
    assert _list_blocks(at, "Titles") == []
    # 80 px cut "spaceship" (84.5 px): named in full under the lists whose score took the 8 px, and only there
    assert narrowed and len(_list_blocks(at, "Categories")) == narrowed


@pytest.mark.usefixtures("demo_indexed")
def test_evidence_table_fits_the_page_and_names_the_head_lists_it_cuts_under_it() -> None:
    """The heads column sized itself to its text (a dozen heads' ranks and votes) and the table scrolled sideways
    in a 1280 px window; now its columns add up to 808 px and the head lists it cuts are named whole under it."""
    at = compare()  # the demo query, k = 6 (its aspects), MiniLM's 12 heads
    per_doc = next(d for d in at.dataframe if HEADS in d.value.columns)
    frame = per_doc.value
    assert frame["title"].tolist() == ["Saxophone", "Vostok 1", "Ogham", "Scaly-foot Snail", "Weld",
                                       "Glass Armonica"]
    # title: "Scaly-foot Snail", 16 x 7.5 + 17 = 137 px; category: "musical instruments", 19 x 7.5 + 17 = 159.5;
    # heads: what is left of 808 px (the page is 818 px inside its border in a 1280 px window)
    assert _widths(per_doc) == {"rank": 44, "title": 137, "category": 160, "score": 64, HEADS: 403}
    # 403 px hold (403 - 17) / 7.5 = 51 characters: longer head lists are named in full under the table
    cut = [(rank, text) for rank, text in zip(frame["rank"], frame[HEADS]) if len(text) > 51]
    assert len(cut) == 6 and all(", h" in text for _, text in cut)  # every document got votes from several heads
    assert _evidence_blocks(at, "Heads (rank in head, vote)") == [
        full_names_html("Heads (rank in head, vote)", [(text, [int(rank)]) for rank, text in cut])]
    assert _evidence_blocks(at, "Titles") == [] and _evidence_blocks(at, "Categories") == []  # they fit
