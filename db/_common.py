"""Small helpers shared by the data-access modules (not part of the public API)."""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from db.errors import NotFoundError

T = TypeVar("T")

LIKE_ESCAPE = "\\"


def sha256_hex(text: str) -> str:
    """sha256 hex digest of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def like_pattern(needle: str) -> str:
    """A ``%needle%`` LIKE pattern with ``%``, ``_`` and the escape char escaped
    (use with ``escape=LIKE_ESCAPE``; always passed as a bound parameter)."""
    escaped = needle.replace(LIKE_ESCAPE, LIKE_ESCAPE * 2)
    escaped = escaped.replace("%", LIKE_ESCAPE + "%").replace("_", LIKE_ESCAPE + "_")
    return f"%{escaped}%"


def name_order(name: str) -> tuple[str, str, str]:
    """Sort key of names shown in lists: by letters first, then case and accents ("alpha", "Alpha" before
    "Ärger", "beta", "Zebra"), the same on every database (a SQL ``ORDER BY`` puts "Zebra" before "alpha"
    on SQLite and MySQL's binary collation, and follows the server's locale on PostgreSQL)."""
    folded = name.casefold()
    letters = "".join(ch for ch in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(ch))
    return (letters, folded, name)


def require(session: Session, model: type[T], key: Any, kind: str) -> T:
    """``session.get(model, key)`` or :class:`NotFoundError` naming ``kind``."""
    row = session.get(model, key)
    if row is None:
        raise NotFoundError(kind, key)
    return row


def to_jsonable(value: Any) -> Any:
    """Recursively turn numpy arrays/scalars, tuples and sets into plain JSON values."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy arrays and numpy scalars
    if callable(tolist):
        return to_jsonable(tolist())
    return value


def identity_key(row: Any) -> str:
    """``"<id>@<created_at ISO>"`` of a stored row (any info with ``id`` and ``created_at``): it tells the row
    from a later one that got the same id. SQLite gives the id of the newest row, once deleted, to the
    next one, so caches and markers that outlive a row key on this, never on the id alone."""
    return f"{row.id}@{row.created_at.isoformat()}"
