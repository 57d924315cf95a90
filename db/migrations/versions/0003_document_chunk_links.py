"""Link every chunk to the source document it was cut from.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

A chunk is a retrievable document row like any other (it is embedded, labelled and used as
ground truth), so the source document is not stored as a row of its own; instead each chunk
names it:

- ``documents.chunk_of``: title of the source document (NULL for documents that were not
  chunked);
- ``documents.chunk_count``: number of chunks the source document was cut into.

Together with the existing ``chunk_index`` (0-based) and ``source`` (identical for all chunks
of one source document, e.g. ``"data.csv row 7"``) this is the chunk's parent key:
``(corpus_id, source, chunk_of)``. Existing rows get NULL (not chunked, or chunked before
0003). ``parent_id`` keeps its meaning (an explicit parent row, for API callers).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.column_types import LONG_TEXT

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``documents.chunk_of`` and ``documents.chunk_count`` (nullable)."""
    # Plain ALTER TABLE ADD COLUMN: a batch rebuild of "documents" with foreign keys on would
    # cascade-delete its labels, vectors and ground-truth links.
    op.add_column("documents", sa.Column("chunk_of", LONG_TEXT, nullable=True))
    op.add_column("documents", sa.Column("chunk_count", sa.Integer(), nullable=True))


def downgrade() -> None:
    """Undo 0003 (native DROP COLUMN, SQLite >= 3.35)."""
    op.drop_column("documents", "chunk_count")
    op.drop_column("documents", "chunk_of")
