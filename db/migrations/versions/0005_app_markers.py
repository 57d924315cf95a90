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

from db.column_types import LONG_TEXT, MYSQL_TABLE_OPTIONS, TIMESTAMP

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
        sa.Column("value", LONG_TEXT, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_app_markers"),
        **MYSQL_TABLE_OPTIONS,
    )
    # Portable SQL (no literal CAST ... AS TEXT: MySQL casts to CHAR): SQLAlchemy compiles it per database.
    corpora = sa.table("corpora", sa.column("id"), sa.column("name"), sa.column("created_at"))
    sets = sa.table("query_sets", sa.column("id"), sa.column("corpus_id"), sa.column("name"), sa.column("created_at"))
    markers = sa.table("app_markers", sa.column("name"), sa.column("value"), sa.column("created_at"),
                       sa.column("updated_at"))
    columns = ["name", "value", "created_at", "updated_at"]
    op.execute(markers.insert().from_select(columns, sa.select(
        sa.literal("demo_corpus"), sa.cast(corpora.c.id, sa.String(20)), corpora.c.created_at, corpora.c.created_at,
    ).where(corpora.c.name == DEMO_CORPUS_NAME)))
    op.execute(markers.insert().from_select(columns, sa.select(
        sa.literal("demo_queries"), sa.cast(sets.c.id, sa.String(20)), sets.c.created_at, sets.c.created_at,
    ).select_from(sets.join(corpora, corpora.c.id == sets.c.corpus_id)).where(
        corpora.c.name == DEMO_CORPUS_NAME, sets.c.name == DEMO_QUERY_SET_NAME)))


def downgrade() -> None:
    """Undo 0005."""
    op.drop_table("app_markers")
