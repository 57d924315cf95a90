"""Add 2-D projections, corpora.labels_version and a suggestions lookup index.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

- ``projections``: fitted UMAP/PCA coordinates of one embedding space of a run.
- ``corpora.labels_version``: counts label changes separately from ``corpora.version``
  (which counts document changes and decides embedding-run staleness). Existing rows get 1.
- ``ix_suggestions_doc_agent`` (document_id, agent, model_version) replaces
  ``ix_suggestions_document_id`` for resumable pre-annotation lookups.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.column_types import BLOB, MYSQL_TABLE_OPTIONS, TIMESTAMP

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``projections``, add ``corpora.labels_version``, swap the suggestions index."""
    op.create_table(
        "projections",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("space", sa.String(length=50), nullable=False),
        sa.Column("method", sa.String(length=20), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("coords", BLOB, nullable=False),
        sa.Column("doc_ids", sa.JSON(), nullable=False),
        sa.Column("model_blob", BLOB, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["embedding_runs.id"],
            name="fk_projections_run_id_embedding_runs",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_projections"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_projections_run_space", "projections", ["run_id", "space", "method"])
    # Plain ALTER TABLE (no batch table rebuild: rebuilding "corpora" with foreign keys on
    # would cascade-delete its children).
    op.add_column(
        "corpora", sa.Column("labels_version", sa.Integer(), server_default="1", nullable=False)
    )
    # The new index first: MySQL refuses to drop the one a foreign key needs until another covers it.
    op.create_index(
        "ix_suggestions_doc_agent", "suggestions", ["document_id", "agent", "model_version"]
    )
    op.drop_index("ix_suggestions_document_id", table_name="suggestions")


def downgrade() -> None:
    """Undo 0002."""
    op.create_index("ix_suggestions_document_id", "suggestions", ["document_id"])
    op.drop_index("ix_suggestions_doc_agent", table_name="suggestions")
    op.drop_column("corpora", "labels_version")  # native DROP COLUMN (SQLite >= 3.35)
    op.drop_table("projections")  # its index goes with it (MySQL refuses to drop one a foreign key uses)
