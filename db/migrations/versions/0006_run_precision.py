"""Record the precision of each embedding run.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23

``embedding_runs.precision``: the dtype of the model's weights during the pass, ``float32`` or
``float16`` (``--half`` on CUDA). Vectors are copied from an earlier run into a new one only when
both runs share it, and a build in one precision never resumes a run of the other, so an index
never mixes float16 and float32 vectors.

Existing rows: ``float32``. Only a CLI build with ``--half`` on a GPU made float16 runs before this
revision, and the stored vectors do not tell them apart; the next ``index --half`` build makes a new,
marked float16 run (delete the old one to keep it from being copied into float32 builds).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``embedding_runs.precision`` (NOT NULL, default ``float32``)."""
    # Plain ALTER TABLE ADD COLUMN with a constant default: no table rebuild.
    op.add_column(
        "embedding_runs",
        sa.Column("precision", sa.String(length=20), server_default="float32", nullable=False),
    )


def downgrade() -> None:
    """Undo 0006 (native DROP COLUMN, SQLite >= 3.35)."""
    op.drop_column("embedding_runs", "precision")
