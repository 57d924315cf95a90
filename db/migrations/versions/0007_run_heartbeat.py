"""Record which process runs an embedding or evaluation run, and when it last said so.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

``owner`` (``host pid N #token``, ``""`` until a run is claimed) and ``heartbeat_at`` on
``embedding_runs`` and ``eval_runs``. A process that runs one updates ``heartbeat_at`` every few
seconds (:mod:`db.liveness`). A run stored as ``running`` whose heartbeat is recent runs in some
process (the app, or the CLI beside it); one whose heartbeat is old, or missing, was interrupted and
may be resumed. Two processes can then no longer resume the same run at once.

Existing rows: no owner, no heartbeat, so a run left ``running`` before this revision reads as
interrupted, as it did before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.column_types import TIMESTAMP

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("embedding_runs", "eval_runs")


def upgrade() -> None:
    """Add ``owner`` (NOT NULL, default ``''``) and ``heartbeat_at`` (nullable) to both run tables."""
    for table in TABLES:  # plain ALTER TABLE ADD COLUMN: no table rebuild
        op.add_column(table, sa.Column("owner", sa.String(length=200), server_default=sa.text("''"), nullable=False))
        op.add_column(table, sa.Column("heartbeat_at", TIMESTAMP, nullable=True))


def downgrade() -> None:
    """Undo 0007 (native DROP COLUMN, SQLite >= 3.35)."""
    for table in TABLES:
        op.drop_column(table, "heartbeat_at")
        op.drop_column(table, "owner")
