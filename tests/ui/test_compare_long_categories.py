"""Compare's result lists name each category in full under the list when the list's narrow category column cuts one
(a table cell shows one line and fades out the rest, readable only on hover); the helpers of ui.render behind it.
A list's title and category share their room by need, the title first (tests/ui/test_compare_widths.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.support.compare_pages import compare, indexed_corpus  # noqa: E402
from ui.compare_layout import _score_extra_px, score_decimals  # noqa: E402
from ui.render import fits_in_cell, full_names_html, ranks_by_name, shortened  # noqa: E402

LONG = "Nineteenth-century Scandinavian maritime trade and shipbuilding"  # 63 characters
LEDGERS = [f"Ledger {i}" for i in range(6)]  # titles that fit


def test_fits_in_cell_counts_7_5_px_a_character_inside_17_px_of_padding() -> None:
    # 90 px: 73 px for the text, 9 characters (67.5 px) fit and 10 (75 px) do not
    assert fits_in_cell("a" * 9, 90) and not fits_in_cell("a" * 10, 90)
    assert fits_in_cell("", 17) and not fits_in_cell("a", 24)  # 7.5 > 24 - 17
    assert not fits_in_cell(LONG, 400)  # 472.5 px of text


def test_ranks_by_name_groups_ranks_in_order_of_first_appearance_and_skips_blanks() -> None:
    assert ranks_by_name([(1, "b"), (2, "a"), (3, "b"), (4, ""), (5, "  "), (6, "a")]) == [("b", [1, 3]),
                                                                                          ("a", [2, 6])]
    assert ranks_by_name([]) == []


def test_full_names_html_escapes_the_names_and_stays_one_html_block() -> None:
    block = full_names_html("Categories", [("<b>x</b> & y", [1, 3]), (LONG, [2])])
    assert block == ("<div class='full-names' style='overflow-wrap: anywhere; margin-bottom: 0.75rem'>Categories: "
                     "<b style='white-space: nowrap'>#1, #3</b>&nbsp;"
                     "<span class='full-name'>&lt;b&gt;x&lt;/b&gt; &amp; y</span> · "
                     f"<b style='white-space: nowrap'>#2</b>&nbsp;<span class='full-name'>{LONG}</span></div>")
    html = MarkdownIt("commonmark").render(block)  # Streamlit's Markdown passes one raw HTML block through
    assert html.strip() == block


def test_shortened_marks_a_cut_label_with_an_ellipsis() -> None:
    assert shortened("abcdef", 4) == "abc…" and shortened("abcd", 4) == "abcd" and shortened("", 3) == ""


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    from tests.support.tiny_models import tiny_gpt2_folder

    return tiny_gpt2_folder(tmp_path / "gpt2", n_layer=2)


def _list_config(title: int, category: int, score: int, decimals: int = 3) -> dict:
    """A result list's column configuration as the page sends it, with these widths (rank 28 px, mark 70)."""
    return {"rank": {"label": "#", "width": 28, "type_config": {"type": "number"}},
            "mark": {"width": 70, "type_config": {"type": "text"}},
            "title": {"width": title, "help": "Titles that the column cuts are listed in full under the list.",
                      "type_config": {"type": "text"}},
            "category": {"width": category, "type_config": {"type": "text"}},
            "score": {"width": score, "type_config": {"type": "number", "format": f"%.{decimals}f"}},
            "_index": {"hidden": True}}


def _lists(at: AppTest) -> list:
    return [d.value for d in at.dataframe if {"rank", "mark", "title", "category"} <= set(d.value.columns)]


def _configs(at: AppTest) -> list[dict]:
    """The result lists' column configurations as the page sent them."""
    return [json.loads(d.proto.columns) for d in at.dataframe if {"rank", "mark"} <= set(d.value.columns)]


@pytest.mark.usefixtures("fresh_env")
def test_two_per_row_lists_name_a_long_category_in_full_under_each_list(tiny_model: Path) -> None:
    corpus_id = indexed_corpus("Long categories", LEDGERS, [LONG] * 6, tiny_model)
    at = compare(corpus_id)
    lists = _lists(at)
    assert len(lists) == 5 and all(f["category"].tolist() == [LONG, LONG] for f in lists)  # k = 2 aspects
    line = ("<div class='full-names' style='overflow-wrap: anywhere; margin-bottom: 0.75rem'>Categories: "
            f"<b style='white-space: nowrap'>#1, #2</b>&nbsp;<span class='full-name'>{LONG}</span></div>")
    # one under each strategy's list, and one under the MRAG evidence table (its category column: 160 px at most)
    assert [c.value for c in at.caption].count(line) == 6

    # two to a row: the short titles ("Ledger 0") keep the title's least 164 px and leave the category the other 88
    # of 252; the 63 characters need 63 x 7.5 + 17 = 489.5
    # Fusion's RRF scores need 4 decimals to differ (ui.compare_layout.score_decimals): 7.5 px more for the
    # score, taken from the category
    decimals = [score_decimals(f["score"]) for f in lists]
    assert sorted(set(decimals)) == [3, 4]
    extra = [_score_extra_px(d) for d in decimals]
    assert _configs(at) == [_list_config(title=164, category=88 - e, score=48 + e, decimals=d)
                            for d, e in zip(decimals, extra)]

    stacked = compare(corpus_id, per_row=1)  # 200 px cut it too (24 characters fit)
    assert [c.value for c in stacked.caption].count(line) == 6
    assert _configs(stacked) == [_list_config(title=400, category=200 - e, score=60 + e, decimals=d)
                                 for d, e in zip(decimals, extra)]


@pytest.mark.usefixtures("fresh_env")
def test_lists_whose_categories_fit_have_no_full_name_line(tiny_model: Path) -> None:
    corpus_id = indexed_corpus("Short categories", LEDGERS, ["cats", "sea", "tea"] * 2, tiny_model)
    at = compare(corpus_id)
    assert len(_lists(at)) == 5
    assert not [c.value for c in at.caption if "full-names" in c.value]
