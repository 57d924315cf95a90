"""Record which text each stored vector was computed from.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

``embedding_vectors.content_hash``: sha256 of the document text the vectors were computed from
(the document's ``content_hash`` at that time). A new embedding run of a changed corpus copies the
vectors of every document whose current hash equals the stored one from earlier runs of the same
model, layer and pooling, and embeds only the new or edited documents.

Existing rows: a run that is not stale (its ``corpus_version`` is the corpus' current version)
was computed from the current texts, so its rows get the documents' current hashes; rows of
stale runs stay NULL and are never copied.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``embedding_vectors.content_hash`` (nullable) and fill it for runs that are not stale."""
    # Plain ALTER TABLE ADD COLUMN (no batch rebuild: that would copy every vector blob).
    op.add_column("embedding_vectors", sa.Column("content_hash", sa.String(length=64), nullable=True))
    op.execute(
        "UPDATE embedding_vectors SET content_hash = "
        "(SELECT d.content_hash FROM documents d WHERE d.id = embedding_vectors.document_id) "
        "WHERE run_id IN (SELECT r.id FROM embedding_runs r JOIN corpora c ON c.id = r.corpus_id "
        "WHERE r.corpus_version = c.version)"
    )


def downgrade() -> None:
    """Undo 0004 (native DROP COLUMN, SQLite >= 3.35)."""
    op.drop_column("embedding_vectors", "content_hash")
