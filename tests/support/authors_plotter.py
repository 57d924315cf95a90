"""The authors' CLI plotter's accesses to its input file (``multirag/plot/plotting.py`` of their repository, behind
``multirag-cli plot``), copied as accesses, not as code, for the tests of the layout written for it
(:func:`mrag_core.evaluation.plotter_layout`).

:func:`walk_like_the_plotter` reads the file with ``pandas.read_json`` as the plotter's ``plot_all`` does, then
touches the same keys with the same nesting (``df[strategy][query_type][measure][k index]``, slices
``[start:stop:step]`` of a ``range``), in ``plot_all``'s order, and checks what its figures need of them: equal
lengths where a figure builds one data frame from several strategies, ratios on the histogram's bins. It returns
the numbers the figures draw, to compare with ours, and raises what the plotter raises (KeyError for a missing
strategy or query type)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mrag_core.evaluation import PLOTTER_QUERY_TYPES

MEASURES = ("success_ratio", "category_success_ratio")
BOX_NAMES = ["multirag", "split-rag", "split-rag-strategy-weighted", "fusion-rag", "fusion-multirag", "standard-rag"]
SPLIT_NAMES = ["multirag", "split-rag", "split-rag-strategy-weighted", "standard-rag"]
VOTING_NAMES = ["multirag", "multirag-strategy-decay", "multirag-strategy-distance", "standard-rag"]


def weighted_ratio(df: pd.DataFrame, name: str, qt: int, doc_range: range, weight: float = 2.0) -> np.ndarray:
    rat = np.array(df[name][qt]["success_ratio"][doc_range.start:doc_range.stop:doc_range.step], dtype=float)
    cat = np.array(df[name][qt]["category_success_ratio"][doc_range.start:doc_range.stop:doc_range.step],
                   dtype=float)
    return (rat * weight + cat) / (weight + 1)


def histogram(df: pd.DataFrame, qt: int = 10, doc_fetched: int = 20) -> dict:
    bins = {round(i / qt, 4) for i in range(qt + 1)}
    counts = {}
    for measure in MEASURES:
        for name in ("multirag", "standard-rag"):
            values = df[name][qt][measure][doc_fetched - 1]
            assert {round(v, 4) for v in values} <= bins  # the plotter looks each ratio up among i / qt
            counts[(name, measure)] = sorted(values)
    return counts


def absolute_box(df: pd.DataFrame, qt: int, doc_range: range) -> None:
    for measure in MEASURES:
        num_queries = len(df["standard-rag"][qt][measure][0])
        flat = {name: np.array(df[name][qt][measure][doc_range.start:doc_range.stop:doc_range.step]).flatten()
                for name in ("multirag", "standard-rag", "split-rag")}
        assert {len(v) for v in flat.values()} == {num_queries * len(doc_range)}


def relative(df: pd.DataFrame, qt: int, doc_range: range, names: list[str], per_k: bool) -> dict[str, np.ndarray]:
    """The weighted ratio's improvement over standard-rag: per query and k (box plots, flattened) or its mean
    per k (line plots)."""
    num_queries = len(df["standard-rag"][qt]["success_ratio"][0])
    weighted = {name: weighted_ratio(df, name, qt, doc_range) for name in names}
    out = {}
    for name, value in weighted.items():
        if per_k:
            out[name] = np.mean(value - weighted["standard-rag"], axis=1)
            assert len(out[name]) == len(doc_range)
        else:
            out[name] = value.flatten() - weighted["standard-rag"].flatten()
            assert len(out[name]) == num_queries * len(doc_range)
    return out


def walk_like_the_plotter(path: Path, query_types=PLOTTER_QUERY_TYPES) -> dict:  # noqa: ANN001
    """``plot_all``'s accesses to the file at ``path`` (its query types 5, 10, 15, 20 unless given); returns the
    histogram's values and, per (figure, query type), the improvements its figures draw. Raises what the plotter
    would: KeyError for a missing strategy or query type."""
    df = pd.read_json(path)
    drawn: dict = {"histogram": histogram(df)} if 10 in query_types else {}
    if 10 in query_types:
        absolute_box(df, 10, range(10, 21, 5))
    for qt in query_types:
        doc_range = range(qt, qt + 11, 2)
        drawn[("voting", qt)] = relative(df, qt, doc_range, VOTING_NAMES, per_k=True)
        drawn[("split", qt)] = relative(df, qt, doc_range, SPLIT_NAMES, per_k=True)
        drawn[("line", qt)] = relative(df, qt, doc_range, SPLIT_NAMES, per_k=True)
    for qt in query_types:
        doc_range = range(qt, qt + 11, 5)
        drawn[("box", qt)] = relative(df, qt, doc_range, BOX_NAMES, per_k=False)
    return drawn
