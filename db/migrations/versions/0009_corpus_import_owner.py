"""Mark a corpus whose import is still being written.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27

``import_owner`` on ``corpora``: NULL for a corpus anyone may use; while an import writes its documents in
chunks (each its own short transaction, so other writers are not locked out for the whole import), the
importing process (``host pid N #token``). Such a corpus is hidden from every listing and lookup until the
import publishes it in one last transaction (:mod:`db.imports`). One left behind by a killed import (its
lease expired, or its process gone) is deleted by the next start or the next import.

Existing rows: NULL (every corpus stored before this revision is a finished one).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``corpora.import_owner`` (nullable; plain ALTER TABLE ADD COLUMN, no table rebuild)."""
    op.add_column("corpora", sa.Column("import_owner", sa.String(length=200), nullable=True))


def downgrade() -> None:
    """Undo 0009: corpora still being imported are deleted first (they would turn into finished ones)."""
    op.execute(sa.text("DELETE FROM corpora WHERE import_owner IS NOT NULL"))
    op.drop_column("corpora", "import_owner")
