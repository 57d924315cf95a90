"""ORM table definitions of the store (the schema at Alembic head); no queries live here.

Conventions:
- Timestamps are timezone-aware UTC (``UTCDateTime``); naive values are taken as UTC.
- Vectors are raw little-endian float32 bytes (:data:`db.column_types.BLOB`), shapes are in the run row.
- Long text and blobs use :mod:`db.column_types` (MySQL's plain ``TEXT`` / ``BLOB`` stop at 64 KB).
- Foreign keys cascade at the database level (``ON DELETE CASCADE``), so deleting a corpus
  removes everything that belongs to it; SQLite needs ``PRAGMA foreign_keys=ON`` (set by
  ``db.engine``).
- Only portable SQLAlchemy types are used (with MySQL variants where its plain types cut values); the
  store is tested on SQLite, PostgreSQL and MariaDB.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator, TypeEngine

from db.column_types import BLOB, LONG_TEXT, TIMESTAMP

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Current time as an aware UTC datetime."""
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator[datetime]):
    """DateTime that always comes back timezone-aware in UTC (SQLite and MySQL drop the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return TIMESTAMP.dialect_impl(dialect)  # DATETIME(6) on MySQL, which drops the zone like SQLite

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


class Base(DeclarativeBase):
    """Declarative base with a stable constraint naming convention (needed by migrations)."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON, list[Any]: JSON}


class Corpus(Base):
    """A document collection. ``version`` counts changes to its documents (texts);
    ``labels_version`` counts changes to categories, suggestions and decisions; ``import_owner`` is set while an
    import still writes it."""

    __tablename__ = "corpora"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str] = mapped_column(LONG_TEXT, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    version: Mapped[int] = mapped_column(Integer, default=1)
    # Added in revision 0002.
    labels_version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    content_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Added in revision 0009: the process still writing the corpus' import (``host pid N #token``); NULL once
    # published. Such a corpus is hidden from listings and lookups (db.imports).
    import_owner: Mapped[str | None] = mapped_column(String(200), nullable=True, default=None)


class Category(Base):
    """A label (aspect) of a corpus."""

    __tablename__ = "categories"
    __table_args__ = (UniqueConstraint("corpus_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpora.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(LONG_TEXT, default="")


class Document(Base):
    """A retrievable document; ``version`` guards label decisions.

    A chunk cut from a longer source document at import names it in ``chunk_of`` (its title),
    with its 0-based ``chunk_index`` and the ``chunk_count`` of the source; all chunks of one
    source share ``source``. ``parent_id`` optionally points at an explicit parent row.
    """

    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("corpus_id", "content_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpora.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(LONG_TEXT, default="")
    text: Mapped[str] = mapped_column(LONG_TEXT)
    source: Mapped[str] = mapped_column(LONG_TEXT, default="")
    content_hash: Mapped[str] = mapped_column(String(64))
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), nullable=True, index=True
    )
    chunk_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Added in revision 0003.
    chunk_of: Mapped[str | None] = mapped_column(LONG_TEXT, nullable=True)
    chunk_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Added in revision 0008: the latest edit of the title or text ("title", "text", "title and text"), when and
    # by whom (None: never edited, or not since 0008), so a conflict names the edit rather than an older label.
    edited: Mapped[str | None] = mapped_column(String(40), nullable=True)
    edited_at: Mapped[datetime | None] = mapped_column(nullable=True)
    edited_by: Mapped[str | None] = mapped_column(String(200), nullable=True)


class Suggestion(Base):
    """A machine label suggestion; kept apart from human decisions."""

    __tablename__ = "suggestions"
    # The composite index was added in revision 0002 (0001 had a plain document_id index).
    __table_args__ = (Index("ix_suggestions_doc_agent", "document_id", "agent", "model_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    category_id: Mapped[int | None] = mapped_column(
        ForeignKey("categories.id", ondelete="CASCADE"), nullable=True
    )
    status: Mapped[str] = mapped_column(String(20), default="ok")
    agent: Mapped[str] = mapped_column(String(200))
    model_version: Mapped[str] = mapped_column(String(200), default="")
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    reason: Mapped[str] = mapped_column(LONG_TEXT, default="")
    error: Mapped[str] = mapped_column(LONG_TEXT, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Decision(Base):
    """A human label decision; rows are never updated.

    ``method`` (revision 0010) says how it was made: ``review`` (one document looked at, in the review queue),
    ``bulk`` (a suggestion accepted in bulk, unseen), ``neighbours`` (a label given to a document and its similar
    ones together), ``import`` (a label the imported file had) or ``adjudication`` (an adjudicator's final label
    where annotators disagreed). ``blind`` (revision 0010): made by a team annotator who saw only their own labels
    and the machine suggestion, never a colleague's (only such decisions count in agreement between annotators).

    The document's label is its latest decision (highest id), except that blind decisions newer than the document's
    latest adjudication do not count for it (:func:`db._labels.latest_decision`)."""

    __tablename__ = "decisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), index=True
    )
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id", ondelete="CASCADE"))
    annotator: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    based_on_version: Mapped[int] = mapped_column(Integer)
    suggestion_id: Mapped[int | None] = mapped_column(
        ForeignKey("suggestions.id", ondelete="SET NULL"), nullable=True
    )
    note: Mapped[str] = mapped_column(LONG_TEXT, default="")
    # Added in revision 0010.
    method: Mapped[str] = mapped_column(String(20), default="review", server_default="review")
    blind: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")  # false on every database


class AnnotationTeam(Base):
    """How a corpus' documents are shared out among its annotators (added in revision 0010): ``overlap_percent``
    of them go to ``per_shared`` annotators each, every other one to one annotator; ``seed`` fixes the order the
    documents are dealt in. ``updated_by`` / ``updated_at``: who changed the team or these settings last."""

    __tablename__ = "annotation_teams"

    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpora.id", ondelete="CASCADE"), primary_key=True)
    overlap_percent: Mapped[float] = mapped_column(Float, default=0.0)
    per_shared: Mapped[int] = mapped_column(Integer, default=2)
    seed: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(200), default="")


class TeamMember(Base):
    """A named annotator of a corpus' team (added in revision 0010); ``position`` orders the team as typed."""

    __tablename__ = "team_members"
    __table_args__ = (UniqueConstraint("corpus_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(
        ForeignKey("annotation_teams.corpus_id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(200))
    position: Mapped[int] = mapped_column(Integer, default=0)
    added_at: Mapped[datetime] = mapped_column(default=utcnow)


class Assignment(Base):
    """A document given to a team member to label (added in revision 0010); never moved once made."""

    __tablename__ = "assignments"

    document_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True
    )
    member_id: Mapped[int] = mapped_column(
        ForeignKey("team_members.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    assigned_at: Mapped[datetime] = mapped_column(default=utcnow)


class QuerySet(Base):
    """A named set of evaluation queries over one corpus."""

    __tablename__ = "query_sets"
    __table_args__ = (UniqueConstraint("corpus_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpora.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(LONG_TEXT, default="")
    source: Mapped[str] = mapped_column(String(50), default="manual")
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Query(Base):
    """One multi-aspect query; its relevant documents are in ``query_ground_truth``."""

    __tablename__ = "queries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    query_set_id: Mapped[int] = mapped_column(
        ForeignKey("query_sets.id", ondelete="CASCADE"), index=True
    )
    text: Mapped[str] = mapped_column(LONG_TEXT)
    n_aspects: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[str] = mapped_column(String(20), default="ok")
    fusion: Mapped[list[Any]] = mapped_column(JSON, default=list)
    generator: Mapped[str] = mapped_column(LONG_TEXT, default="")
    error: Mapped[str] = mapped_column(LONG_TEXT, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    position: Mapped[int] = mapped_column(Integer, default=0)


class QueryGroundTruth(Base):
    """Relevant document of a query (ordered by ``position``, one per aspect usually)."""

    __tablename__ = "query_ground_truth"

    query_id: Mapped[int] = mapped_column(
        ForeignKey("queries.id", ondelete="CASCADE"), primary_key=True
    )
    document_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    position: Mapped[int] = mapped_column(Integer, default=0)


class EmbeddingRun(Base):
    """One embedding pass of a model over a corpus at a given ``corpus_version``."""

    __tablename__ = "embedding_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpora.id", ondelete="CASCADE"), index=True)
    corpus_version: Mapped[int] = mapped_column(Integer)
    model_name: Mapped[str] = mapped_column(String(300))
    model_path: Mapped[str] = mapped_column(LONG_TEXT, default="")
    layer: Mapped[int] = mapped_column(Integer)
    pooling: Mapped[str] = mapped_column(String(50))
    # Added in revision 0006: the weights' dtype during the pass ("float32", or "float16" with --half on CUDA).
    precision: Mapped[str] = mapped_column(String(20), default="float32", server_default="float32")
    n_docs: Mapped[int] = mapped_column(Integer, default=0)
    n_heads: Mapped[int] = mapped_column(Integer)
    head_dim: Mapped[int] = mapped_column(Integer)
    dim: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20), default="running")
    timings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    importance: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str] = mapped_column(LONG_TEXT, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # Added in revision 0007: the process that runs it ("" before any claim) and when it last said it still does.
    owner: Mapped[str] = mapped_column(String(200), default="", server_default=text("''"))
    heartbeat_at: Mapped[datetime | None] = mapped_column(nullable=True)


class EmbeddingVector(Base):
    """Vectors of one document in one run: ``standard`` float32[dim], ``heads`` float32[h, hd], computed
    from the text whose sha256 is ``content_hash``."""

    __tablename__ = "embedding_vectors"

    run_id: Mapped[int] = mapped_column(
        ForeignKey("embedding_runs.id", ondelete="CASCADE"), primary_key=True
    )
    document_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    standard: Mapped[bytes] = mapped_column(BLOB)
    heads: Mapped[bytes] = mapped_column(BLOB)
    # Added in revision 0004: sha256 of the text the vectors were computed from (NULL: unknown).
    content_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)


class Projection(Base):
    """A 2-D projection (UMAP/PCA) of one embedding space of a run (added in revision 0002)."""

    __tablename__ = "projections"
    __table_args__ = (Index("ix_projections_run_space", "run_id", "space", "method"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("embedding_runs.id", ondelete="CASCADE"))
    space: Mapped[str] = mapped_column(String(50))
    method: Mapped[str] = mapped_column(String(20))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    seed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    coords: Mapped[bytes] = mapped_column(BLOB)
    doc_ids: Mapped[list[Any]] = mapped_column(JSON)
    model_blob: Mapped[bytes | None] = mapped_column(BLOB, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class EvalRun(Base):
    """One evaluation of retrieval strategies on a query set."""

    __tablename__ = "eval_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    corpus_id: Mapped[int] = mapped_column(ForeignKey("corpora.id", ondelete="CASCADE"), index=True)
    query_set_id: Mapped[int] = mapped_column(ForeignKey("query_sets.id", ondelete="CASCADE"))
    embedding_run_id: Mapped[int | None] = mapped_column(
        ForeignKey("embedding_runs.id", ondelete="SET NULL"), nullable=True
    )
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    seed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    status: Mapped[str] = mapped_column(String(20), default="running")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)
    timing: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    llm_usage: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error: Mapped[str] = mapped_column(LONG_TEXT, default="")
    # Added in revision 0007: the process that runs it ("" before any claim) and when it last said it still does.
    owner: Mapped[str] = mapped_column(String(200), default="", server_default=text("''"))
    heartbeat_at: Mapped[datetime | None] = mapped_column(nullable=True)


class EvalResult(Base):
    """Result of one strategy on one query; the primary key makes resumed runs upsert-safe."""

    __tablename__ = "eval_results"

    run_id: Mapped[int] = mapped_column(
        ForeignKey("eval_runs.id", ondelete="CASCADE"), primary_key=True
    )
    strategy: Mapped[str] = mapped_column(String(100), primary_key=True)
    query_id: Mapped[int] = mapped_column(
        ForeignKey("queries.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    retrieved: Mapped[list[Any]] = mapped_column(JSON)
    rsr: Mapped[list[Any]] = mapped_column(JSON)
    csr: Mapped[list[Any]] = mapped_column(JSON)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class LLMCacheEntry(Base):
    """A cached LLM response keyed by sha256 of (model, kind, messages). No credentials."""

    __tablename__ = "llm_cache"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(String(300))
    kind: Mapped[str] = mapped_column(String(100))
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    response_text: Mapped[str] = mapped_column(LONG_TEXT)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    latency_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AppMarker(Base):
    """A named fact about this database that outlives the rows it is about (added in revision 0005);
    e.g. ``demo_corpus``: the id of the demo corpus set up here, so a deleted demo is not put back."""

    __tablename__ = "app_markers"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(LONG_TEXT, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
