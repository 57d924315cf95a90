"""Downloads of a stored evaluation run: the authors' JSON layouts, the CLI plotter's JSON (and what it
cannot draw), the per-query CSV and the files' name. No Streamlit here.
"""

from __future__ import annotations

import io
import json

from mrag_core.evaluation import (
    authors_file_layout,
    authors_layout,
    plotter_layout,
)
from mrag_core.evaluation import plotter_notes as result_plotter_notes
from mrag_core.strategy_registry import label_of
from services.workflows.eval_results import RunMetrics, to_evaluation_result

__all__ = [
    "authors_json",
    "plotter_json",
    "plotter_notes",
    "run_csv",
]


def authors_json(metrics: RunMetrics) -> str:
    """The run in the authors' layout: ``{strategy: {n_aspects: {success_ratio: [k][query], ...}}}``."""
    return json.dumps(authors_layout(to_evaluation_result(metrics)))


def authors_file_json(metrics: RunMetrics) -> str:
    """The run as the MRAG authors' result files are written (keys ``rat``, ``suc``, ``category_rat``,
    ``category_suc``; their strategy names): :func:`~mrag_core.evaluation.authors_file_layout`."""
    return json.dumps(authors_file_layout(to_evaluation_result(metrics)))


def plotter_json(metrics: RunMetrics) -> str:
    """The run as the authors' CLI plotter (``multirag-cli plot``) reads it: keys ``standard-rag``, ``multirag``,
    ``multirag-strategy-decay``... with ``success_ratio`` / ``category_success_ratio``
    (:func:`~mrag_core.evaluation.plotter_layout`)."""
    return json.dumps(plotter_layout(to_evaluation_result(metrics)))


def plotter_notes(metrics: RunMetrics) -> list[str]:
    """What the plotter cannot draw from :func:`plotter_json` of the run (strategy keys left out, query types or
    depth missing), in words; empty when it draws every figure (:func:`~mrag_core.evaluation.plotter_notes`)."""
    return result_plotter_notes(to_evaluation_result(metrics))


CSV_SETTINGS = ("run_id", "w", "k_max")
"""The run's settings that :func:`run_csv` repeats in every row, after the seven result columns."""


def run_csv(metrics: RunMetrics) -> str:
    """Per-query, per-k rows as CSV: strategy, query_id, n_aspects, k, rsr, csr, weighted, then the run's
    :data:`CSV_SETTINGS` in every row: ``weighted`` is (w·RSR + CSR) / (w + 1) with the run's ``w``, and ``k``
    runs 1..``k_max``; with them, the CSVs of several runs concatenated in pandas still say which run, which w and
    which k range each row comes from. Last, ``label``: the strategy's name as the app shows it (the registry's
    label, e.g. ``Sentence round-robin (Standard + MRAG per sentence)`` for the recommended one)."""
    buf = io.StringIO()
    frame = metrics.per_query[["strategy", "query_id", "n_aspects", "k", "rsr", "csr", "weighted"]]
    frame.assign(run_id=metrics.run.id, w=metrics.w, k_max=metrics.k_max,
                 label=frame["strategy"].map(label_of)).to_csv(buf, index=False)
    return buf.getvalue()


def export_name(metrics: RunMetrics) -> str:
    """The stem of a run's download files, naming the settings its numbers depend on: ``eval_run_7_w2_kmax32``
    (``w`` as written, 0.5 -> ``w0.5``), since the JSON layouts have no place for them."""
    return f"eval_run_{metrics.run.id}_w{metrics.w:g}_kmax{metrics.k_max}"
