"""Record the latest edit of a document's title or text: what, when and by whom.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28

``edited`` (``"title"``, ``"text"`` or ``"title and text"``), ``edited_at`` and ``edited_by`` on
``documents``, set by ``db.update_document``. A label decision or an edit refused because the document
changed since it was loaded then names that change: the latest decision when it made the current
version, else the recorded edit. Before, it named the latest decision's annotator whatever the
change was, so a text edit was blamed on 'import'.

Existing rows: nothing recorded, so a conflict over an edit made before this revision names no one.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.column_types import TIMESTAMP

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``edited``, ``edited_at`` and ``edited_by`` (all nullable) to ``documents``."""
    op.add_column("documents", sa.Column("edited", sa.String(length=40), nullable=True))
    op.add_column("documents", sa.Column("edited_at", TIMESTAMP, nullable=True))
    op.add_column("documents", sa.Column("edited_by", sa.String(length=200), nullable=True))


def downgrade() -> None:
    """Undo 0008 (native DROP COLUMN, SQLite >= 3.35)."""
    for column in ("edited_by", "edited_at", "edited"):
        op.drop_column("documents", column)
