"""ui.strategy_colors: one fixed colour and legend position per strategy, in every chart."""

from __future__ import annotations

from mrag_core.evaluation import NAMED_STRATEGIES
from ui.strategy_colors import SPARE_COLORS, STRATEGY_COLORS, strategy_colors, strategy_order, strategy_style


def test_every_named_strategy_has_its_own_colour() -> None:
    assert set(STRATEGY_COLORS) == set(NAMED_STRATEGIES)
    assert len(set(STRATEGY_COLORS.values())) == len(STRATEGY_COLORS)
    assert not set(SPARE_COLORS) & set(STRATEGY_COLORS.values())


def test_colour_does_not_depend_on_the_other_strategies_of_a_chart() -> None:
    with_standard = strategy_colors(["fusion", "standard", "mrag"])
    without = strategy_colors(["mrag", "fusion"])
    assert with_standard["mrag"] == without["mrag"] == "#1f77b4"
    assert with_standard["fusion"] == without["fusion"]


def test_order_is_the_named_order_then_others_as_given() -> None:
    assert strategy_order(["fusion-mrag", "zeta", "mrag", "standard", "alpha", "mrag"]) == [
        "standard", "mrag", "fusion-mrag", "zeta", "alpha"]


def test_unknown_strategies_take_spare_colours_in_turn() -> None:
    names = [f"custom-{i}" for i in range(len(SPARE_COLORS) + 1)]
    colours = strategy_colors(["mrag", *names])
    assert [colours[n] for n in names] == [*SPARE_COLORS, SPARE_COLORS[0]]
    assert colours["mrag"] == STRATEGY_COLORS["mrag"]


def test_style_for_plotly_express() -> None:
    style = strategy_style(["split", "standard"])
    assert style == {"color_discrete_map": {"standard": "#7f7f7f", "split": "#ffbb78"},
                     "category_orders": {"strategy": ["standard", "split"]}}
