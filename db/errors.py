"""Exception types raised by the store; every one a user can hit carries a readable message."""

from __future__ import annotations

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
    """A label decision was based on a document version that someone else has since changed.

    Attributes name the document, the version the caller saw, the current version and,
    when known, who made the latest change and when (UTC).
    """

    def __init__(
        self,
        document_id: int,
        expected_version: int,
        actual_version: int,
        changed_by: str | None = None,
        changed_at: datetime | None = None,
    ) -> None:
        self.document_id = document_id
        self.expected_version = expected_version
        self.actual_version = actual_version
        self.changed_by = changed_by
        self.changed_at = changed_at
        who = f" by {changed_by!r}" if changed_by else ""
        when = f" at {changed_at:%Y-%m-%d %H:%M:%S} UTC" if changed_at else ""
        super().__init__(
            f"Document {document_id} was changed{who}{when} after you loaded it "
            f"(you saw version {expected_version}, it is now version {actual_version}). "
            "Reload the document and decide again."
        )
