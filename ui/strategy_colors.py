"""One colour and one legend position per retrieval strategy, the same in every chart.

Plotly colours a chart's traces in the order they appear, so without a fixed map "mrag" was red in
one chart of a run and blue in the next (the relative-improvement chart has no "standard"). Each
family has two shades: the plain strategy light, its MRAG variant dark (Fusion RAG light green,
Fusion MRAG green); Standard RAG is grey and MRAG blue, the comparison the app is about.
"""

from __future__ import annotations

from collections.abc import Iterable

from mrag_core.strategy_registry import STRATEGIES as NAMED_STRATEGIES

STRATEGY_COLORS: dict[str, str] = {
    "standard": "#7f7f7f",
    "mrag": "#1f77b4",
    "mrag-decay": "#6baed6",
    "mrag-distance": "#08306b",
    "split": "#ffbb78",
    "split-weighted": "#ff7f0e",
    "fusion": "#98df8a",
    "fusion-mrag": "#2ca02c",
    "sentence-round-robin": "#17becf",
    "multi-query": "#ff9896",
    "multi-query-mrag": "#d62728",
    "hyde": "#c5b0d5",
    "hyde-mrag": "#9467bd",
    "intent": "#c49c94",
    "intent-mrag": "#8c564b",
}
"""Colour of each named strategy (:data:`mrag_core.strategy_registry.STRATEGIES`)."""

SPARE_COLORS: tuple[str, ...] = ("#e377c2", "#bcbd22", "#f7b6d2", "#dbdb8d", "#9edae5", "#393b79",
                                 "#637939", "#8c6d31", "#843c39")
"""Colours for strategies without a fixed one (in the order they are met), then repeated."""


def strategy_order(names: Iterable[str]) -> list[str]:
    """``names`` without repeats, named strategies first in :data:`NAMED_STRATEGIES` order (Standard, MRAG,
    its variants, Split, Fusion, the LLM-assisted ones), then any other name in the order given."""
    seen = list(dict.fromkeys(str(n) for n in names))
    rank = {name: i for i, name in enumerate(NAMED_STRATEGIES)}
    return sorted((n for n in seen if n in rank), key=rank.__getitem__) + [n for n in seen if n not in rank]


def strategy_colors(names: Iterable[str]) -> dict[str, str]:
    """``{name: colour}`` for ``names``: the fixed colour of a named strategy, else the next spare colour."""
    out: dict[str, str] = {}
    spare = 0
    for name in strategy_order(names):
        if name in STRATEGY_COLORS:
            out[name] = STRATEGY_COLORS[name]
        else:
            out[name] = SPARE_COLORS[spare % len(SPARE_COLORS)]
            spare += 1
    return out


def strategy_style(names: Iterable[str]) -> dict[str, dict]:
    """Keyword arguments for a Plotly Express chart with ``color="strategy"``: the fixed colours and the
    fixed legend order."""
    names = strategy_order(names)
    return {"color_discrete_map": strategy_colors(names), "category_orders": {"strategy": names}}
