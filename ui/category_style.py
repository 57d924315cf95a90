"""One colour and one marker shape per document category, the same in every chart that draws categories.

Plotly's Dark24 + Light24, which the Maps page used, puts two near-identical magentas (#DA16FF, #FB00D1: CIEDE2000
9.3) among its first twelve, so two of the demo's twelve categories could not be told apart. The palette here is
Glasbey's extension of D3's Category10 (colorcet's ``glasbey_category10``), its first 24 colours less the two too
pale to see on Plotly's plot background (#bcbcff lavender, #ffff9a pale yellow): 22 colours, any two at least 16
apart in CIEDE2000 (tests/ui/test_category_style.py measures it). Past 22 categories the colours repeat, each
round with another marker shape, so no two categories share both.

The shapes leave out those the maps give other meanings: ``star`` (the query) and ``x`` (a missed ground-truth
document); ui.chart_export draws each of them as a matplotlib marker.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CATEGORY_PALETTE: tuple[str, ...] = (
    "#1f77b3", "#ff7e0e", "#2ba02b", "#d62628", "#9367bc", "#8c564b", "#e277c1", "#7e7e7e", "#bcbc21", "#16bdcf",
    "#3a0182", "#004201", "#0fffa8", "#5d003f", "#d8afa1", "#b80080", "#004d52", "#6b6400", "#7c0100", "#6026ff",
    "#564964", "#8cb893",
)
"""Category colours in the order categories take them."""

CATEGORY_SYMBOLS: tuple[str, ...] = ("circle", "square", "diamond", "triangle-up", "triangle-down", "pentagon",
                                     "hexagon", "cross")
"""Plotly marker symbols: the first round of colours is drawn as circles, the next as squares, and so on."""


@dataclass(frozen=True)
class CategoryStyle:
    """How a category is drawn: a colour (hex) and a Plotly marker symbol."""

    color: str
    symbol: str


def category_order(names: Iterable[str]) -> list[str]:
    """``names`` without repeats, sorted: the order categories take colours in, so a category keeps its colour
    whatever order its documents come in."""
    return sorted({str(n) for n in names})


def category_styles(names: Iterable[str]) -> dict[str, CategoryStyle]:
    """``{category: CategoryStyle}`` for ``names`` (:func:`category_order`): the i-th category takes colour
    ``i mod 22`` of :data:`CATEGORY_PALETTE` and symbol ``i div 22`` of :data:`CATEGORY_SYMBOLS` (both repeat
    once every colour has met every symbol, past 176 categories)."""
    n = len(CATEGORY_PALETTE)
    return {name: CategoryStyle(CATEGORY_PALETTE[i % n], CATEGORY_SYMBOLS[(i // n) % len(CATEGORY_SYMBOLS)])
            for i, name in enumerate(category_order(names))}
