"""Remember facts about the database itself: the demo corpus was set up here.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23

``app_markers`` (name, value, created_at, updated_at). ``demo_corpus`` holds the id of the demo corpus the
app set up in this database: a demo corpus that the user renamed is still found, and one the user
deleted is not created again at the next start (the Home page offers to restore it).

``demo_queries`` likewise holds the id of the demo query set once created, so a deleted one stays deleted.

Existing rows: a database that already holds the demo corpus (by its shipped name) gets the first
marker, and its demo query set (if still there) the second.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The demo corpus' and query set's names when this revision was written (a migration keeps its own copy).
DEMO_CORPUS_NAME = "MRAG Studio demo"
DEMO_QUERY_SET_NAME = "Demo queries"


def upgrade() -> None:
    """Create ``app_markers`` and mark an existing demo corpus."""
    op.create_table(
        "app_markers",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_app_markers"),
    )
    op.execute(
        sa.text(
            "INSERT INTO app_markers (name, value, created_at, updated_at) "
            "SELECT 'demo_corpus', CAST(id AS TEXT), created_at, created_at FROM corpora WHERE name = :name"
        ).bindparams(name=DEMO_CORPUS_NAME)
    )
    op.execute(
        sa.text(
            "INSERT INTO app_markers (name, value, created_at, updated_at) "
            "SELECT 'demo_queries', CAST(s.id AS TEXT), s.created_at, s.created_at FROM query_sets s "
            "JOIN corpora c ON c.id = s.corpus_id WHERE c.name = :corpus AND s.name = :name"
        ).bindparams(corpus=DEMO_CORPUS_NAME, name=DEMO_QUERY_SET_NAME)
    )


def downgrade() -> None:
    """Undo 0005."""
    op.drop_table("app_markers")
