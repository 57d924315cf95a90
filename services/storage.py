"""The store as the pages and ``ui`` see it: opening it, the errors they catch, the record types they annotate
with, and a row's identity. Everything else a page asks of the store goes through a workflow function.

The pages and ``ui`` do not import :mod:`db` (an import-linter contract in ``pyproject.toml`` checks it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import db
from db import (  # the store's record types and errors, as they are
    LIVE_WINDOW_S,
    AgentInfo,
    BusyError,
    CategoryInfo,
    CorpusInfo,
    DocumentRow,
    DuplicateError,
    EmbeddingRunInfo,
    EvalRunInfo,
    InvalidInputError,
    NotFoundError,
    QueryRow,
    QuerySetInfo,
    RunInProgressError,
    Store,
    StoreError,
    VersionConflictError,
)

# what this module passes on from :mod:`db` as it is, then its own functions
__all__ = [
    "Store",
    "StoreError",
    "NotFoundError",
    "DuplicateError",
    "InvalidInputError",
    "VersionConflictError",
    "RunInProgressError",
    "BusyError",
    "CorpusInfo",
    "CategoryInfo",
    "DocumentRow",
    "EmbeddingRunInfo",
    "QuerySetInfo",
    "QueryRow",
    "EvalRunInfo",
    "AgentInfo",
    "LIVE_WINDOW_S",
    "open_store",
    "identity_key",
    "heartbeat_age",
]


# --------------------------------------------------------------------------- the store, for the pages


def open_store(url: str | None = None, *, migrate: bool = True, echo: bool = False) -> db.Store:
    """The app's store (``url``, else ``$MRAG_DATABASE_URL`` or the default file), migrated (:func:`db.open_store`)."""
    return db.open_store(url, migrate=migrate, echo=echo)


def identity_key(row: Any) -> str:
    """A stored row's identity beyond its id (``id@created``: SQLite hands a deleted row's id on)
    (:func:`db.identity_key`)."""
    return db.identity_key(row)


def heartbeat_age(heartbeat_at: datetime | None, now: datetime | None = None) -> float | None:
    """Seconds since a run's last heartbeat (None: none yet) (:func:`db.heartbeat_age`)."""
    return db.heartbeat_age(heartbeat_at, now)
