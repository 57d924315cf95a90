"""Exception types raised by the store; every one a user can hit carries a readable message."""

from __future__ import annotations

import os
import socket
from datetime import datetime


class StoreError(Exception):
    """Base class of every error the store raises on purpose."""


class NotFoundError(StoreError, LookupError):
    """A row that the caller named by id (or name) does not exist."""

    def __init__(self, kind: str, key: object) -> None:
        self.kind = kind
        self.key = key
        super().__init__(f"{kind} {key!r} does not exist (it may have been deleted).")


class DuplicateError(StoreError):
    """An insert or rename would break a uniqueness rule (e.g. two corpora with one name)."""


class InvalidInputError(StoreError, ValueError):
    """The caller passed data the store refuses (empty text, wrong shape, foreign ids...)."""


class BusyError(StoreError):
    """Another writer kept the database locked longer than the busy timeout (nothing was written)."""


class SchemaError(StoreError):
    """The database schema cannot be brought to the version this code expects."""


class VersionConflictError(StoreError):
    """A label decision or an edit was based on a document version that someone else has since changed.

    Attributes name the document, the version the caller saw, the current version and, when known, the latest
    change: ``change`` in words (``"labelled by 'alice'"``, ``"its text was edited by 'bob'"``), who made it
    (``changed_by``) and when (``changed_at``, UTC). Without a known change the message names nobody.
    """

    def __init__(
        self,
        document_id: int,
        expected_version: int,
        actual_version: int,
        changed_by: str | None = None,
        changed_at: datetime | None = None,
        *,
        change: str | None = None,
    ) -> None:
        self.document_id = document_id
        self.expected_version = expected_version
        self.actual_version = actual_version
        self.changed_by = changed_by
        self.changed_at = changed_at
        self.change = change if change is not None else (f"changed by {changed_by!r}" if changed_by else "changed")
        when = f" at {changed_at:%Y-%m-%d %H:%M:%S} UTC" if changed_at else ""
        what = f" was {self.change}" if not self.change.startswith("its ") else f": {self.change}"
        super().__init__(
            f"Document {document_id}{what}{when} after you loaded it "
            f"(you saw version {expected_version}, it is now version {actual_version}). "
            "Reload the document and try again."
        )


#: A run stored as ``running`` whose last heartbeat is older than this many seconds no longer runs anywhere
#: (:mod:`db.liveness`).
LIVE_WINDOW_S = 30.0


def this_process() -> str:
    """``host pid N``: this process, as an owner (:func:`db.liveness.new_owner`) names it."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def process_of(owner: str) -> str:
    """The process an owner ``host pid N #token`` names (``host pid N``); ``another process`` for no owner."""
    return owner.split(" #")[0] or "another process"


class RunInProgressError(StoreError):
    """Another process runs this embedding or evaluation run now (its heartbeat is recent).

    ``kind`` ("Index" or "Evaluation run"), ``run_id``, ``owner`` (``host pid N #token``) and
    ``seconds_ago`` (age of its last heartbeat) say which and since when.
    """

    def __init__(self, kind: str, run_id: int, owner: str, seconds_ago: float) -> None:
        self.kind = kind
        self.run_id = run_id
        self.owner = owner
        self.seconds_ago = seconds_ago
        where = process_of(owner)
        if where == this_process():
            super().__init__(f"{kind} {run_id} is already running in this app; wait until it ends or stop it.")
            return
        super().__init__(
            f"{kind} {run_id} is running in another process ({where if owner else 'owner unknown'}; last heard from "
            f"{seconds_ago:.0f} s ago). Stop it there or wait until it ends; once it has been silent for "
            f"{LIVE_WINDOW_S:.0f} s it counts as interrupted and can be resumed here."
        )

