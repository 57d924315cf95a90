"""The stored evaluation runs as the pages list, stop and delete them (running them is
:mod:`services.workflows.evaluation_runs`)."""

from __future__ import annotations

import db

__all__ = [
    "list_eval_runs",
    "get_eval_run",
    "delete_eval_run",
    "request_eval_stop",
    "eval_stop_requested",
]


# --------------------------------------------------------------------------- the store, for the pages


def list_eval_runs(
    store: db.Store,
    corpus_id: int | None = None,
    query_set_id: int | None = None,
) -> list[db.EvalRunInfo]:
    """The evaluation runs, of a corpus or a query set (:func:`db.list_eval_runs`)."""
    return db.list_eval_runs(store, corpus_id, query_set_id)


def get_eval_run(store: db.Store, run_id: int) -> db.EvalRunInfo:
    """The evaluation run ``run_id`` (raises ``NotFoundError``) (:func:`db.get_eval_run`)."""
    return db.get_eval_run(store, run_id)


def delete_eval_run(store: db.Store, run_id: int) -> None:
    """Delete an evaluation run with its results (:func:`db.delete_eval_run`)."""
    return db.delete_eval_run(store, run_id)


def request_eval_stop(store: db.Store, run_id: int) -> bool:
    """Ask a running evaluation to stop (wherever it runs); True when asked now (:func:`db.request_eval_stop`)."""
    return db.request_eval_stop(store, run_id)


def eval_stop_requested(store: db.Store, run_id: int) -> bool:
    """Whether a stop was asked of the evaluation run ``run_id`` (:func:`db.eval_stop_requested`)."""
    return db.eval_stop_requested(store, run_id)
