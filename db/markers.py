"""Named facts about the database itself (``app_markers``): read, set, clear.

A marker outlives the rows it is about: ``demo_corpus`` keeps the id of the demo corpus set up in
this database after the user renamed or deleted it.
"""

from __future__ import annotations

from sqlalchemy import delete, select

from db.engine import Store
from db.errors import InvalidInputError
from db.models import AppMarker, utcnow

MAX_NAME = 100


def get_marker(store: Store, name: str) -> str | None:
    """The marker's value, or None when it was never set (or was cleared)."""
    with store.session(readonly=True) as session:
        return session.scalar(select(AppMarker.value).where(AppMarker.name == name))


def set_marker(store: Store, name: str, value: str = "") -> None:
    """Set the marker (created, or its value replaced). Raises InvalidInputError for an empty or long name."""
    if not name or len(name) > MAX_NAME:
        raise InvalidInputError(f"A marker name must have 1 to {MAX_NAME} characters.")
    with store.session() as session:
        row = session.get(AppMarker, name)
        if row is None:
            session.add(AppMarker(name=name, value=value))
        elif row.value != value:
            row.value = value
            row.updated_at = utcnow()


def clear_marker(store: Store, name: str) -> bool:
    """Remove the marker; True when it was set."""
    with store.session() as session:
        return bool(session.execute(delete(AppMarker).where(AppMarker.name == name)).rowcount)
