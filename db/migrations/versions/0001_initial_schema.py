"""Initial schema: corpora, labels, query sets, embedding runs, evaluations, LLM cache.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Written by hand (portable types only; timestamps are timezone-aware UTC).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.column_types import BLOB, LONG_TEXT, MYSQL_TABLE_OPTIONS, TIMESTAMP

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, TIMESTAMP, nullable=nullable)


def _fk(table: str, column: str, target: str, ondelete: str = "CASCADE") -> sa.ForeignKeyConstraint:
    ref_table = target.split(".")[0]
    return sa.ForeignKeyConstraint(
        [column], [target], name=f"fk_{table}_{column}_{ref_table}", ondelete=ondelete
    )


def upgrade() -> None:
    """Create every table of the first release."""
    op.create_table(
        "corpora",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", LONG_TEXT, nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_corpora"),
        sa.UniqueConstraint("name", name="uq_corpora_name"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_table(
        "llm_cache",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=300), nullable=False),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("response_text", LONG_TEXT, nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("latency_s", sa.Float(), nullable=True),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("key", name="pk_llm_cache"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_table(
        "categories",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("corpus_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", LONG_TEXT, nullable=False),
        _fk("categories", "corpus_id", "corpora.id"),
        sa.PrimaryKeyConstraint("id", name="pk_categories"),
        sa.UniqueConstraint("corpus_id", "name", name="uq_categories_corpus_id_name"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_categories_corpus_id", "categories", ["corpus_id"])
    op.create_table(
        "documents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("corpus_id", sa.Integer(), nullable=False),
        sa.Column("title", LONG_TEXT, nullable=False),
        sa.Column("text", LONG_TEXT, nullable=False),
        sa.Column("source", LONG_TEXT, nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("chunk_index", sa.Integer(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        _ts("created_at"),
        _fk("documents", "corpus_id", "corpora.id"),
        _fk("documents", "parent_id", "documents.id"),
        sa.PrimaryKeyConstraint("id", name="pk_documents"),
        sa.UniqueConstraint(
            "corpus_id", "content_hash", name="uq_documents_corpus_id_content_hash"
        ),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_documents_corpus_id", "documents", ["corpus_id"])
    op.create_index("ix_documents_parent_id", "documents", ["parent_id"])
    op.create_table(
        "embedding_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("corpus_id", sa.Integer(), nullable=False),
        sa.Column("corpus_version", sa.Integer(), nullable=False),
        sa.Column("model_name", sa.String(length=300), nullable=False),
        sa.Column("model_path", LONG_TEXT, nullable=False),
        sa.Column("layer", sa.Integer(), nullable=False),
        sa.Column("pooling", sa.String(length=50), nullable=False),
        sa.Column("n_docs", sa.Integer(), nullable=False),
        sa.Column("n_heads", sa.Integer(), nullable=False),
        sa.Column("head_dim", sa.Integer(), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("timings", sa.JSON(), nullable=False),
        sa.Column("importance", sa.JSON(), nullable=True),
        sa.Column("error", LONG_TEXT, nullable=False),
        _ts("created_at"),
        _ts("finished_at", nullable=True),
        _fk("embedding_runs", "corpus_id", "corpora.id"),
        sa.PrimaryKeyConstraint("id", name="pk_embedding_runs"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_embedding_runs_corpus_id", "embedding_runs", ["corpus_id"])
    op.create_table(
        "query_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("corpus_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", LONG_TEXT, nullable=False),
        sa.Column("source", sa.String(length=50), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        _ts("created_at"),
        _fk("query_sets", "corpus_id", "corpora.id"),
        sa.PrimaryKeyConstraint("id", name="pk_query_sets"),
        sa.UniqueConstraint("corpus_id", "name", name="uq_query_sets_corpus_id_name"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_query_sets_corpus_id", "query_sets", ["corpus_id"])
    op.create_table(
        "embedding_vectors",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("standard", BLOB, nullable=False),
        sa.Column("heads", BLOB, nullable=False),
        _fk("embedding_vectors", "document_id", "documents.id"),
        _fk("embedding_vectors", "run_id", "embedding_runs.id"),
        sa.PrimaryKeyConstraint("run_id", "document_id", name="pk_embedding_vectors"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_embedding_vectors_document_id", "embedding_vectors", ["document_id"])
    op.create_table(
        "eval_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("corpus_id", sa.Integer(), nullable=False),
        sa.Column("query_set_id", sa.Integer(), nullable=False),
        sa.Column("embedding_run_id", sa.Integer(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        _ts("created_at"),
        _ts("finished_at", nullable=True),
        sa.Column("timing", sa.JSON(), nullable=False),
        sa.Column("llm_usage", sa.JSON(), nullable=False),
        sa.Column("error", LONG_TEXT, nullable=False),
        _fk("eval_runs", "corpus_id", "corpora.id"),
        _fk("eval_runs", "embedding_run_id", "embedding_runs.id", ondelete="SET NULL"),
        _fk("eval_runs", "query_set_id", "query_sets.id"),
        sa.PrimaryKeyConstraint("id", name="pk_eval_runs"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_eval_runs_corpus_id", "eval_runs", ["corpus_id"])
    op.create_table(
        "queries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("query_set_id", sa.Integer(), nullable=False),
        sa.Column("text", LONG_TEXT, nullable=False),
        sa.Column("n_aspects", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("fusion", sa.JSON(), nullable=False),
        sa.Column("generator", LONG_TEXT, nullable=False),
        sa.Column("error", LONG_TEXT, nullable=False),
        _ts("created_at"),
        sa.Column("position", sa.Integer(), nullable=False),
        _fk("queries", "query_set_id", "query_sets.id"),
        sa.PrimaryKeyConstraint("id", name="pk_queries"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_queries_query_set_id", "queries", ["query_set_id"])
    op.create_table(
        "suggestions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("model_version", sa.String(length=200), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("reason", LONG_TEXT, nullable=False),
        sa.Column("error", LONG_TEXT, nullable=False),
        _ts("created_at"),
        _fk("suggestions", "category_id", "categories.id"),
        _fk("suggestions", "document_id", "documents.id"),
        sa.PrimaryKeyConstraint("id", name="pk_suggestions"),
        **MYSQL_TABLE_OPTIONS,
    )
    # Replaced by a composite (document_id, agent, model_version) index in 0002.
    op.create_index("ix_suggestions_document_id", "suggestions", ["document_id"])
    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.Column("annotator", sa.String(length=200), nullable=False),
        _ts("created_at"),
        sa.Column("based_on_version", sa.Integer(), nullable=False),
        sa.Column("suggestion_id", sa.Integer(), nullable=True),
        sa.Column("note", LONG_TEXT, nullable=False),
        _fk("decisions", "category_id", "categories.id"),
        _fk("decisions", "document_id", "documents.id"),
        _fk("decisions", "suggestion_id", "suggestions.id", ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name="pk_decisions"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_decisions_document_id", "decisions", ["document_id"])
    op.create_table(
        "eval_results",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("strategy", sa.String(length=100), nullable=False),
        sa.Column("query_id", sa.Integer(), nullable=False),
        sa.Column("retrieved", sa.JSON(), nullable=False),
        sa.Column("rsr", sa.JSON(), nullable=False),
        sa.Column("csr", sa.JSON(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=True),
        _fk("eval_results", "query_id", "queries.id"),
        _fk("eval_results", "run_id", "eval_runs.id"),
        sa.PrimaryKeyConstraint("run_id", "strategy", "query_id", name="pk_eval_results"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_eval_results_query_id", "eval_results", ["query_id"])
    op.create_table(
        "query_ground_truth",
        sa.Column("query_id", sa.Integer(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        _fk("query_ground_truth", "document_id", "documents.id"),
        _fk("query_ground_truth", "query_id", "queries.id"),
        sa.PrimaryKeyConstraint("query_id", "document_id", name="pk_query_ground_truth"),
        **MYSQL_TABLE_OPTIONS,
    )
    op.create_index("ix_query_ground_truth_document_id", "query_ground_truth", ["document_id"])


def downgrade() -> None:
    """Drop every table (children first)."""
    for table in (
        "query_ground_truth",
        "eval_results",
        "decisions",
        "suggestions",
        "queries",
        "eval_runs",
        "embedding_vectors",
        "query_sets",
        "embedding_runs",
        "documents",
        "categories",
        "llm_cache",
        "corpora",
    ):
        op.drop_table(table)
