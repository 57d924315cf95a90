"""mrag_core.evaluation.plotter_layout: results as the authors' CLI plotter (multirag/plot/plotting.py of their
repository, behind ``multirag-cli plot``) reads them, checked by walking the file as the plotter does
(tests/support/authors_plotter.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrag_core.evaluation import (
    PLOTTER_KEYS,
    PLOTTER_QUERY_TYPES,
    EvaluationResult,
    QueryCase,
    StrategyResult,
    authors_file_layout,
    authors_layout,
    plotter_layout,
    plotter_missing,
    plotter_notes,
)
from tests.support.authors_plotter import absolute_box, histogram, walk_like_the_plotter


def synthetic_result(strategies: list[str], aspect_counts=PLOTTER_QUERY_TYPES, per_count: int = 3,  # noqa: ANN001
                     k_max: int = 32, seed: int = 0) -> EvaluationResult:
    """Results of ``strategies`` on ``per_count`` queries of each aspect count: RSR and CSR multiples of 1/n that
    never fall as k grows, as real prefix ratios."""
    rng = np.random.default_rng(seed)
    cases = [QueryCase((), n) for n in aspect_counts for _ in range(per_count)]
    result = EvaluationResult(k_max=k_max, cases=cases)
    n = np.array([c.n_aspects for c in cases])[:, None]
    for name in strategies:
        found = np.minimum(np.cumsum(rng.random((len(cases), k_max)) < 0.3, axis=1), n)
        cats = np.maximum(found, np.minimum(np.cumsum(rng.random((len(cases), k_max)) < 0.4, axis=1), n))
        result.strategies[name] = StrategyResult(name, found / n, cats / n, [[] for _ in cases])
    return result


ALL_EIGHT = list(PLOTTER_KEYS)


def test_every_figure_of_plot_all_reads_the_layout(tmp_path: Path) -> None:
    result = synthetic_result([*ALL_EIGHT, "hyde"])
    path = tmp_path / "plotter.json"
    path.write_text(json.dumps(plotter_layout(result)))
    drawn = walk_like_the_plotter(path)
    assert plotter_missing(list(result.strategies)) == [] and plotter_notes(result) == []

    def weighted(name: str, n: int) -> np.ndarray:  # [query][k] of the n-aspect queries
        rows = [i for i, c in enumerate(result.cases) if c.n_aspects == n]
        s = result.strategies[name]
        return (2 * s.rsr[rows] + s.csr[rows]) / 3

    # what the figures draw are our ratios: the 10-aspect queries' weighted improvement of MRAG over Standard RAG,
    # mean per k at k = 11, 13, ..., 21 (the plotter's indexes 10, 12, ..., 20)
    expected = (weighted("mrag", 10) - weighted("standard", 10))[:, 10:21:2].mean(axis=0)
    np.testing.assert_allclose(drawn[("line", 10)]["multirag"], expected, atol=1e-12)
    expected = (weighted("mrag-distance", 20) - weighted("standard", 20))[:, 20:31:2].mean(axis=0)
    np.testing.assert_allclose(drawn[("voting", 20)]["multirag-strategy-distance"], expected, atol=1e-12)
    # box plots: per k and query, flattened k by k ([k][query])
    expected = (weighted("split-weighted", 15) - weighted("standard", 15))[:, 15:26:5].T.flatten()
    np.testing.assert_allclose(drawn[("box", 15)]["split-rag-strategy-weighted"], expected, atol=1e-12)
    rows = [i for i, c in enumerate(result.cases) if c.n_aspects == 10]
    # read_json parses floats to within an ulp (0.6 may come back 0.6000000000000001): the plotter rounds first
    assert drawn["histogram"][("multirag", "success_ratio")] == pytest.approx(
        sorted(result.strategies["mrag"].rsr[rows, 19]), abs=1e-12)


def test_the_layout_holds_the_ratios_and_the_documented_successes() -> None:
    result = synthetic_result(ALL_EIGHT, aspect_counts=(2, 5), per_count=2, k_max=4)
    layout = plotter_layout(result)
    assert list(layout) == ["standard-rag", "multirag", "multirag-strategy-decay", "multirag-strategy-distance",
                            "split-rag", "split-rag-strategy-weighted", "fusion-rag", "fusion-multirag"]
    ours = authors_layout(result)
    for name, key in PLOTTER_KEYS.items():
        assert list(layout[key]) == ["2", "5"]
        for n in ("2", "5"):
            block = layout[key][n]
            assert set(block) == {"success", "success_ratio", "category_success", "category_success_ratio"}
            assert block["success_ratio"] == ours[name][n]["success_ratio"]  # [k][query]
            assert block["category_success_ratio"] == ours[name][n]["category_success_ratio"]
            assert block["success"] == [[int(r == 1.0) for r in row] for row in block["success_ratio"]]
            assert block["category_success"] == [[int(r == 1.0) for r in row]
                                                 for row in block["category_success_ratio"]]


def test_the_other_layouts_fail_in_the_plotter_as_reported(tmp_path: Path) -> None:
    """Neither earlier export loads in the plotter: KeyError 'multirag' (the issue's report)."""
    result = synthetic_result(ALL_EIGHT)
    for layout in (authors_layout, authors_file_layout):
        path = tmp_path / f"{layout.__name__}.json"
        path.write_text(json.dumps(layout(result)))
        with pytest.raises(KeyError, match="multirag"):
            walk_like_the_plotter(path)


def test_strategies_not_run_are_left_out_and_named(tmp_path: Path) -> None:
    """``bench``'s default strategies fill five of the eight keys: the other three are left out (nothing is drawn
    for a strategy that was not run), the notes name them, and the plotter draws the figures before the first
    that needs one (histogram and absolute box plot), then stops with a KeyError."""
    result = synthetic_result(["standard", "mrag", "split", "fusion", "fusion-mrag"])
    assert plotter_missing(list(result.strategies)) == [
        "multirag-strategy-decay", "multirag-strategy-distance", "split-rag-strategy-weighted"]
    layout = plotter_layout(result)
    assert set(layout) == {"standard-rag", "multirag", "split-rag", "fusion-rag", "fusion-multirag"}
    (note,) = plotter_notes(result)
    assert "multirag-strategy-decay, multirag-strategy-distance, split-rag-strategy-weighted are left out" in note
    assert "strategies mrag-decay, mrag-distance, split-weighted were not run" in note
    path = tmp_path / "five.json"
    path.write_text(json.dumps(layout))
    df = pd.read_json(path)
    histogram(df)
    absolute_box(df, 10, range(10, 21, 5))
    with pytest.raises(KeyError, match="multirag-strategy-decay"):
        walk_like_the_plotter(path)


def test_notes_name_query_types_and_depth_the_run_lacks(tmp_path: Path) -> None:
    result = synthetic_result(ALL_EIGHT, aspect_counts=(2, 3), k_max=16)
    (note,) = plotter_notes(result)
    assert note == ("its plot_all draws queries of 5, 10, 15, 20 aspects, each at k up to its aspect count + 11 "
                    "(31 for 20); these results hold queries of 2, 3 aspects, scored to k = 16: call its figure "
                    "functions with their own aspect counts n (k up to n + 11)")
    path = tmp_path / "small.json"
    path.write_text(json.dumps(plotter_layout(result)))
    with pytest.raises(KeyError):
        walk_like_the_plotter(path)  # plot_all's query type 10 is not there
    drawn = walk_like_the_plotter(path, query_types=(2, 3))  # its figure functions with the run's own types
    assert len(drawn[("voting", 3)]["multirag"]) == 6  # k = 4, 6, ..., 14
    assert plotter_notes(synthetic_result(ALL_EIGHT, k_max=30))[0].endswith("scored to k = 30: call its figure "
                                                                            "functions with their own aspect "
                                                                            "counts n (k up to n + 11)")
