"""Annotation teams: named annotators, document assignment, blind decisions and adjudication.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29

- ``decisions.method``: how a decision was made (``review``, ``bulk``, ``neighbours``, ``import``,
  ``adjudication``), so that suggestions accepted in bulk (which agree with the suggestion by construction)
  are counted apart from documents a person looked at; ``decisions.blind``: made by a team annotator who
  saw only their own labels and the suggestion (only those count in agreement between annotators).
- ``annotation_teams`` (one row per corpus: the share of documents given to several annotators, how many,
  the seed), ``team_members`` (its named annotators) and ``assignments`` (document -> member).

Existing decisions: ``blind`` false (nobody annotated blind before); ``method`` filled from what the code
that wrote them did: the import's annotator -> ``import``; the note find-similar writes -> ``neighbours``;
a decision that accepted a suggestion in one transaction with other such decisions of the same annotator
(bulk acceptance stores all its decisions with one timestamp; the review queue stores one at a time) ->
``bulk``; anything else -> ``review``. (A bulk acceptance of a single suggestion cannot be told apart from
a one-by-one acceptance: it reads as ``review``.)
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.column_types import MYSQL_TABLE_OPTIONS, TIMESTAMP

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: What the code of revision 0009 wrote (a migration keeps its own copy of such names).
IMPORT_ANNOTATOR = "import"
NEIGHBOURS_NOTE = "labelled with neighbours"


def upgrade() -> None:
    """Add the two decision columns (filled as the module says) and the three team tables."""
    op.add_column("decisions", sa.Column("method", sa.String(length=20), server_default="review", nullable=False))
    # '0' reads as false on every database (PostgreSQL takes it as a boolean literal; sa.false() would differ
    # from what MySQL reports back)
    op.add_column("decisions", sa.Column("blind", sa.Boolean(), server_default="0", nullable=False))
    decisions = sa.table("decisions", sa.column("id"), sa.column("annotator"), sa.column("note"),
                         sa.column("created_at"), sa.column("suggestion_id"), sa.column("method"))
    op.execute(decisions.update().where(decisions.c.annotator == IMPORT_ANNOTATOR).values(method="import"))
    op.execute(decisions.update().where(decisions.c.note == NEIGHBOURS_NOTE, decisions.c.method == "review")
               .values(method="neighbours"))
    one, other = decisions.alias("one"), decisions.alias("other")
    grouped = (sa.select(one.c.id).select_from(one.join(other, sa.and_(
        other.c.annotator == one.c.annotator, other.c.created_at == one.c.created_at, other.c.id != one.c.id,
        other.c.suggestion_id.is_not(None))))
        .where(one.c.suggestion_id.is_not(None), one.c.method == "review"))
    # through a derived table: MySQL / MariaDB refuse an UPDATE whose subquery reads the table it updates
    ids = sa.select(grouped.subquery("bulk_ids").c.id)
    op.execute(decisions.update().where(decisions.c.id.in_(ids)).values(method="bulk"))

    op.create_table(
        "annotation_teams",
        sa.Column("corpus_id", sa.Integer(), nullable=False),
        sa.Column("overlap_percent", sa.Float(), nullable=False),
        sa.Column("per_shared", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["corpus_id"], ["corpora.id"], name="fk_annotation_teams_corpus_id_corpora",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("corpus_id", name="pk_annotation_teams"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_table(
        "team_members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("corpus_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("added_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(["corpus_id"], ["annotation_teams.corpus_id"],
                                name="fk_team_members_corpus_id_annotation_teams", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_team_members"),
        sa.UniqueConstraint("corpus_id", "name", name="uq_team_members_corpus_id_name"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_team_members_corpus_id", "team_members", ["corpus_id"])
    op.create_table(
        "assignments",
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("assigned_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"], name="fk_assignments_document_id_documents",
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["member_id"], ["team_members.id"], name="fk_assignments_member_id_team_members",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("document_id", "member_id", name="pk_assignments"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_assignments_member_id", "assignments", ["member_id"])


def downgrade() -> None:
    """Undo 0010: the team tables go; the decisions stay (their method and blind flag are lost)."""
    op.drop_table("assignments")  # with its indexes (MySQL refuses to drop one a foreign key uses first)
    op.drop_table("team_members")
    op.drop_table("annotation_teams")
    op.drop_column("decisions", "blind")
    op.drop_column("decisions", "method")
