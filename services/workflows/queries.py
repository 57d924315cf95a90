"""The stored query sets and queries as the pages read and delete them (generating, editing and importing them
is :mod:`services.workflows.querysets`)."""

from __future__ import annotations

import db

__all__ = [
    "list_query_sets",
    "get_query_set",
    "list_queries",
    "get_query",
    "delete_query_set",
    "delete_query",
    "runs_with_results_for",
]


# --------------------------------------------------------------------------- the store, for the pages


def list_query_sets(store: db.Store, corpus_id: int | None = None) -> list[db.QuerySetInfo]:
    """The query sets of a corpus, or of all (:func:`db.list_query_sets`)."""
    return db.list_query_sets(store, corpus_id)


def get_query_set(store: db.Store, query_set_id: int) -> db.QuerySetInfo:
    """The query set ``query_set_id`` (raises ``NotFoundError``) (:func:`db.get_query_set`)."""
    return db.get_query_set(store, query_set_id)


def list_queries(store: db.Store, query_set_id: int, *, status: str | None = None) -> list[db.QueryRow]:
    """The queries of a query set, optionally of one status (:func:`db.list_queries`)."""
    return db.list_queries(store, query_set_id, status=status)


def get_query(store: db.Store, query_id: int) -> db.QueryRow:
    """The query ``query_id`` (raises ``NotFoundError``) (:func:`db.get_query`)."""
    return db.get_query(store, query_id)


def delete_query_set(store: db.Store, query_set_id: int) -> None:
    """Delete a query set with its queries (:func:`db.delete_query_set`)."""
    return db.delete_query_set(store, query_set_id)


def delete_query(store: db.Store, query_id: int) -> None:
    """Delete one query (:func:`db.delete_query`)."""
    return db.delete_query(store, query_id)


def runs_with_results_for(store: db.Store, query_id: int) -> list[int]:
    """The ids of the evaluation runs that stored results for the query (:func:`db.runs_with_results_for`)."""
    return db.runs_with_results_for(store, query_id)
