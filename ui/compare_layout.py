"""The Compare page's result-list and evidence-table layout: how many lists to a row, each table's column widths
(px) and the lines under a table that name in full what its columns cut. Pure functions of the rows shown, except
the column configurations (Streamlit's ``st.column_config``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd
import streamlit as st

from services.workflows.compare import ResultRow
from ui.render import CELL_PADDING_PX, CHAR_PX, fits_in_cell, full_names_html, ranks_by_name

ALL_SIDE_BY_SIDE = 0
LAYOUTS = {1: "stacked", 2: "2 per row", 3: "3 per row", ALL_SIDE_BY_SIDE: "all side by side"}
DEFAULT_PER_ROW = 2  # five lists side by side left 6-10 characters of title at 1280-1400 px


def list_rows(n: int, per_row: int) -> list[list[int]]:
    """The result lists' positions, row by row: ``per_row`` to a row (all in one row for ``ALL_SIDE_BY_SIDE``)."""
    step = n if per_row == ALL_SIDE_BY_SIDE else per_row
    return [list(range(start, min(start + step, n))) for start in range(0, n, max(1, step))]


# A result list's columns per layout (px): rank, mark, score, the room of title and category together, and the
# least widths of title and category. Two lists share a row of a 1280 px window at about 400 px each (444 at 1366,
# 481 at 1440, 720 at 1920): their widths add up to a little less (a list's border takes 2 px), so every column is
# in view, with rank, mark (wide enough for "cat again") and score (0.216) at their least. A wider list spreads
# what is left equally over the columns (Streamlit grows each one). Stacked lists have the page's width, 820 px at
# 1280. The least title widths are the fixed ones of before: 164 px cut titles after some 24 characters.
LIST_COLUMNS = {1: (28, 70, 60, 600, 400, 160), 2: (28, 70, 48, 252, 164, 60)}
# Three to a row: a list's view is 289 px in a 1366 px window (331 px of columns scrolled sideways there), so the
# title and category share 140 px; titles and categories they cut are named in full under the list. A 1280 px
# window, or all lists side by side, leaves less: the list then scrolls sideways (the control's help says so).
NARROW_COLUMNS = (28, 70, 48, 140, 80, 60)
TITLE_HELP = "Titles that the column cuts are listed in full under the {}."


def needed_px(texts: Iterable[str]) -> int:
    """The width (px) of a one-line table cell that shows each of ``texts`` whole (:func:`ui.render.fits_in_cell`:
    :data:`~ui.render.CHAR_PX` a character and the cell's padding); an empty cell's padding when there are none."""
    return math.ceil(max((len(t) for t in texts), default=0) * CHAR_PX + CELL_PADDING_PX)


SCORE_DECIMALS = (3, 8)
"""The least and most decimals a result list shows its scores with (:func:`score_decimals`)."""


def score_decimals(scores: Iterable[float], least: int = SCORE_DECIMALS[0], most: int = SCORE_DECIMALS[1]) -> int:
    """The fewest decimals, at least ``least`` and at most ``most``, at which scores that differ are shown
    different: the smallest gap between two of them decides. Reciprocal Rank Fusion scores, 1/(60 + rank) summed
    over the fused lists, lie close together (1/61, 1/62, 1/63 are 0.0164, 0.0161, 0.0159): at three decimals a
    Fusion list read 0.016 from top to bottom. Scores equal to 12 decimals count as one (ties stay ties)."""
    values = sorted({round(float(s), 12) for s in scores})
    for decimals in range(least, most + 1):
        if len({f"{v:.{decimals}f}" for v in values}) == len(values):
            return decimals
    return most


def _score_extra_px(decimals: int) -> int:
    """How much wider the score column needs to be for ``decimals`` decimals than for the least, three (what the
    least score widths of :data:`LIST_COLUMNS` hold)."""
    return math.ceil(max(0, decimals - SCORE_DECIMALS[0]) * CHAR_PX)


def list_widths(per_row: int, rows: list[ResultRow]) -> tuple[int, int, int, int, int]:
    """A result list's column widths (px) for ``per_row`` lists to a row (:data:`LIST_COLUMNS`): rank, mark, title,
    category, score. The title gets the width its longest title needs, at least its least width and at most all of
    the room but the category's least; the category gets the rest. So a list of long titles gives the title all
    it can (two to a row: 192 px, 24 characters by :func:`ui.render.fits_in_cell`, some 30 as drawn), and a list
    of short ones leaves the category its room. Cut texts are named in full under the list
    (:func:`titles_line`, :func:`categories_line`). Scores shown with more decimals (:func:`score_decimals`) widen
    the score column by what they need, taken from the room of title and category, so the list is no wider."""
    rank, mark, score, room, least_title, least_category = LIST_COLUMNS.get(per_row, NARROW_COLUMNS)
    extra = _score_extra_px(score_decimals(r.score for r in rows))
    score, room = score + extra, room - extra
    title = max(least_title, min(needed_px(r.title for r in rows), room - least_category))
    return rank, mark, title, room - title, score


def list_columns(widths: tuple[int, int, int, int, int], decimals: int = SCORE_DECIMALS[0]) -> dict[str, Any]:
    """A result list's column configuration for its ``widths`` (:func:`list_widths`), its scores shown with
    ``decimals`` decimals (:func:`score_decimals` of its rows)."""
    rank, mark, title, category, score = widths
    return {"rank": st.column_config.NumberColumn("#", width=rank),
            "mark": st.column_config.TextColumn(width=mark),
            "title": st.column_config.TextColumn(width=title, help=TITLE_HELP.format("list")),
            "category": st.column_config.TextColumn(width=category),
            "score": st.column_config.NumberColumn(format=f"%.{decimals}f", width=score)}


def cut_names_line(heading: str, ranked: Iterable[tuple[int, str]], width: int) -> str | None:
    """The names of ``ranked`` (``(rank, name)`` pairs) that a one-line table cell ``width`` px wide cuts
    (:func:`ui.render.fits_in_cell`), each in full after its ranks, as one escaped HTML block
    (:func:`ui.render.full_names_html`); None when every one fits. The names that fit are not repeated. A name's
    runs of white space become one space, as the cell shows it: a blank line would end the HTML block, and
    Streamlit would read the rest as Markdown."""
    cut = [(int(rank), " ".join(name.split())) for rank, name in ranked if not fits_in_cell(name, width)]
    return full_names_html(heading, ranks_by_name(cut)) if cut else None


def titles_line(rows: list[ResultRow], widths: tuple[int, int, int, int, int]) -> str | None:
    """The list's titles that its title column (``widths``, :func:`list_widths`) cuts, in full after their ranks
    (:func:`cut_names_line`); None when every title fits. A table cell shows one line and fades out the rest of a
    long title."""
    return cut_names_line("Titles", ((r.rank, r.title) for r in rows), widths[2])


def categories_line(rows: list[ResultRow], widths: tuple[int, int, int, int, int]) -> str | None:
    """The list's categories in full, each after its ranks (:func:`ui.render.full_names_html`), when its category
    column (``widths``, :func:`list_widths`) cuts one of them; None when every one fits. A table cell shows one
    line and hides the rest of a long name behind a fade, readable only on hover."""
    if all(fits_in_cell(r.category, widths[3]) for r in rows):
        return None
    return full_names_html("Categories", ranks_by_name((r.rank, r.category) for r in rows))


HEADS_COLUMN = "heads (rank in head, vote)"
# The MRAG evidence table's widths (px): rank and score, the title's and category's most, and the room of all five
# columns. The room is less than the page's width in a 1280 px window (820 px, 818 inside the border), so every
# column, the score among them, stays in view. Sized to their texts, the columns ran past the edge: the heads
# column holds a dozen entries like "h3 (#1, 1.288)" for a model of 12 heads (the demo's table scrolled sideways at
# 1280 px, 847 px of columns in 818), and long titles and categories could push the score itself out of view.
EVIDENCE_RANK, EVIDENCE_SCORE, EVIDENCE_TITLE_MAX, EVIDENCE_CATEGORY_MAX, EVIDENCE_ROOM = 44, 64, 260, 160, 808


def evidence_widths(per_doc: pd.DataFrame) -> dict[str, int]:
    """The MRAG evidence table's column widths (px), by column name: the title and category what their longest
    text needs, up to their most; the heads what the room leaves (at least 280 px)."""
    title = min(needed_px(per_doc["title"]), EVIDENCE_TITLE_MAX)
    category = min(needed_px(per_doc["category"]), EVIDENCE_CATEGORY_MAX)
    return {"rank": EVIDENCE_RANK, "title": title, "category": category, "score": EVIDENCE_SCORE,
            HEADS_COLUMN: EVIDENCE_ROOM - EVIDENCE_RANK - EVIDENCE_SCORE - title - category}


def evidence_columns(widths: dict[str, int]) -> dict[str, Any]:
    """The MRAG evidence table's column configuration for its ``widths`` (:func:`evidence_widths`)."""
    return {"rank": st.column_config.NumberColumn(width=widths["rank"]),
            "title": st.column_config.TextColumn(width=widths["title"], help=TITLE_HELP.format("table")),
            "category": st.column_config.TextColumn(width=widths["category"]),
            "score": st.column_config.NumberColumn(format="%.4f", width=widths["score"]),
            HEADS_COLUMN: st.column_config.TextColumn(
                width=widths[HEADS_COLUMN],
                help="Each head that has the document in its top c: the document's rank in that head and the votes "
                     "it got there. Lists that the column cuts are written in full under the table.")}


def evidence_lines(per_doc: pd.DataFrame, widths: dict[str, int]) -> list[str]:
    """The evidence table's titles, categories and head lists that its columns (``widths``) cut, in full after
    their ranks, one HTML block a column (:func:`cut_names_line`); none when every text fits."""
    lines = (cut_names_line(heading, zip(per_doc["rank"], per_doc[column]), widths[column])
             for heading, column in (("Titles", "title"), ("Categories", "category"),
                                     (HEADS_COLUMN.capitalize(), HEADS_COLUMN)))
    return [line for line in lines if line]
