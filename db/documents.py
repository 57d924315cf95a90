"""Documents of a corpus: add (with dedupe, labels and chunks), read, page, search, edit, delete.

Labels that come with imported documents are stored as human *decisions* by annotator ``"import"``
(:data:`IMPORT_ANNOTATOR`): they are ground truth from the source data set, not machine suggestions. Each
decision bumps ``document.version`` (so a document's version is 1 + its number of decisions). Adding, editing or
deleting documents bumps ``corpus.version`` (see :mod:`db.corpora` for the versioning contract).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session

from db._common import LIKE_ESCAPE, like_pattern, require, sha256_hex
from db._labels import latest_decision, latest_suggestion, version_conflict
from db.categories import _ensure_categories
from db.corpora import bump_documents_version, bump_labels_version
from db.engine import Store
from db.errors import DuplicateError, InvalidInputError, NotFoundError
from db.models import (
    Category,
    Corpus,
    Decision,
    Document,
    Query,
    QueryGroundTruth,
    Suggestion,
    utcnow,
)

IMPORT_ANNOTATOR = "import"


@dataclass(frozen=True)
class DocumentRow:
    """A document with its effective label (latest decision, else latest ok suggestion).

    ``label_source`` is ``"decision"``, ``"suggestion"`` or None (no label). A chunk names
    its source document in ``chunk_of`` (title) with ``chunk_index`` (0-based) of
    ``chunk_count``; see :attr:`chunk_label`.
    """

    id: int
    corpus_id: int
    title: str
    text: str
    source: str
    content_hash: str
    parent_id: int | None
    chunk_index: int | None
    version: int
    created_at: datetime
    label_category_id: int | None = None
    label: str | None = None
    label_source: str | None = None
    chunk_of: str | None = None
    chunk_count: int | None = None

    @property
    def chunk_label(self) -> str | None:
        """``"chunk 2 of 5 of 'Rome'"`` for a chunk, None for a whole document."""
        if self.chunk_of is None or self.chunk_index is None:
            return None
        of_n = f" of {self.chunk_count}" if self.chunk_count else ""
        return f"chunk {self.chunk_index + 1}{of_n} of '{self.chunk_of}'"


@dataclass(frozen=True)
class DocumentPage:
    """One page of :func:`list_documents`; ``total`` counts all matches, not just this page."""

    items: list[DocumentRow]
    total: int
    offset: int
    limit: int | None


@dataclass(frozen=True)
class AddResult:
    """Outcome of :func:`add_documents`.

    ``document_ids`` are the new ids in input order of the added documents;
    ``duplicate_indices`` are input positions skipped as duplicates.
    """

    added: int
    skipped_duplicates: int
    document_ids: list[int]
    duplicate_indices: list[int]


# --------------------------------------------------------------------------- helpers


def _document_select(corpus_id: int) -> Any:
    """SELECT of documents joined with their effective label (used by the list functions)."""
    dec = latest_decision()
    sug = latest_suggestion()
    label_id = func.coalesce(dec.row.category_id, sug.row.category_id)
    stmt = (
        select(
            Document,
            dec.row.category_id.label("dec_cat"),
            sug.row.category_id.label("sug_cat"),
        )
        .select_from(Document)
        .outerjoin(dec.row, dec.on)
        .outerjoin(sug.row, sug.on)
        .where(Document.corpus_id == corpus_id)
    )
    return stmt, label_id, dec.row, sug.row


def _to_row(
    doc: Document, dec_cat: int | None, sug_cat: int | None, names: Mapping[int, str]
) -> DocumentRow:
    if dec_cat is not None:
        cat_id, source = dec_cat, "decision"
    elif sug_cat is not None:
        cat_id, source = sug_cat, "suggestion"
    else:
        cat_id, source = None, None
    return DocumentRow(
        id=doc.id,
        corpus_id=doc.corpus_id,
        title=doc.title,
        text=doc.text,
        source=doc.source,
        content_hash=doc.content_hash,
        parent_id=doc.parent_id,
        chunk_index=doc.chunk_index,
        version=doc.version,
        created_at=doc.created_at,
        label_category_id=cat_id,
        label=names.get(cat_id) if cat_id is not None else None,
        label_source=source,
        chunk_of=doc.chunk_of,
        chunk_count=doc.chunk_count,
    )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _category_names(session: Session, corpus_id: int) -> dict[int, str]:
    stmt = select(Category.id, Category.name).where(Category.corpus_id == corpus_id)
    return {cid: name for cid, name in session.execute(stmt)}


# --------------------------------------------------------------------------- documents


def add_documents(
    store: Store,
    corpus_id: int,
    docs: Sequence[Mapping[str, Any]],
    dedupe: bool = True,
    create_missing_categories: bool = True,
) -> AddResult:
    """Add documents in ONE transaction: either all of them are stored or none.

    Each doc is a mapping with ``text`` (required, non-blank) and optional ``title``,
    ``source``, ``label`` (category name), ``suggested_label`` (a category name stored as a
    suggestion by agent ``"import"``, not a decision: an exported machine suggestion read back),
    ``parent_id`` (an existing document of this
    corpus: the doc is a chunk of it), ``chunk_index`` (0-based), ``chunk_of`` (title of the
    source document a chunk was cut from) and ``chunk_count`` (its number of chunks).

    Duplicates (same sha256 of ``text`` in the corpus or earlier in ``docs``) are skipped
    when ``dedupe`` is true, else raise DuplicateError. A ``label`` is stored as a decision
    by annotator ``"import"``; unknown label names create the category unless
    ``create_missing_categories`` is false (then InvalidInputError). Bumps
    ``corpus.version`` if anything was added (and ``labels_version`` if labels were).

    Raises:
        NotFoundError: unknown corpus.
        InvalidInputError: a doc without text, a bad parent_id or label (names its index).
        DuplicateError: a duplicate text with ``dedupe=False``.
    """
    with store.session() as session:
        require(session, Corpus, corpus_id, "Corpus")
        seen = set(session.scalars(select(Document.content_hash).where(Document.corpus_id == corpus_id)))
        return insert_documents(session, corpus_id, docs, seen, dedupe=dedupe,
                                create_missing_categories=create_missing_categories)


def insert_documents(session: Session, corpus_id: int, docs: Sequence[Mapping[str, Any]], stored: set[str], *,
                     dedupe: bool = True, create_missing_categories: bool = True, bump: bool = True,
                     first_index: int = 0, stored_means: str = "already in the corpus") -> AddResult:
    """:func:`add_documents`' work inside an open write ``session``: ``stored`` holds the content hashes of the
    corpus' documents that ``docs`` may repeat (all of them, or just those among ``docs``' hashes). ``bump=False``
    leaves the corpus' versions alone (an import that publishes the corpus later bumps them once). Messages count
    documents from ``first_index`` + 1 (the position of ``docs[0]`` in the whole import) and say that a text in
    ``stored`` is ``stored_means``."""
    seen: dict[str, int] = {h: -1 for h in stored}
    categories = {
        c.name: c
        for c in session.scalars(select(Category).where(Category.corpus_id == corpus_id))
    }
    new_docs: list[Document] = []
    labels: list[Category | None] = []
    suggested: list[Category | None] = []
    duplicates: list[int] = []
    parent_ids: set[int] = set()
    for index, doc in enumerate(docs):
        text = doc.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(f"Document #{first_index + index + 1} has no text.")
        content_hash = sha256_hex(text)
        if content_hash in seen:
            if not dedupe:
                where = stored_means if seen[content_hash] < 0 else (
                    f"the same as document #{first_index + seen[content_hash] + 1}"
                )
                raise DuplicateError(
                    f"Document #{first_index + index + 1} ({str(doc.get('title') or text[:40])!r}) is {where}."
                )
            duplicates.append(index)
            continue
        seen[content_hash] = index
        def category_of(label_name: Any) -> Category | None:
            if label_name is None or not str(label_name).strip():
                return None
            cleaned = str(label_name).strip()
            found = categories.get(cleaned)
            if found is None:
                if not create_missing_categories:
                    raise InvalidInputError(
                        f"Document #{first_index + index + 1} has label {cleaned!r}, which is not a "
                        "category of this corpus."
                    )
                found = _ensure_categories(session, corpus_id, [cleaned])[0]
                categories[cleaned] = found
            return found

        category = category_of(doc.get("label"))
        suggested.append(category_of(doc.get("suggested_label")))
        parent_id = doc.get("parent_id")
        if parent_id is not None:
            parent_ids.add(int(parent_id))
        new_docs.append(
            Document(
                corpus_id=corpus_id,
                title=str(doc.get("title") or ""),
                text=text,
                source=str(doc.get("source") or ""),
                content_hash=content_hash,
                parent_id=int(parent_id) if parent_id is not None else None,
                chunk_index=_opt_int(doc.get("chunk_index")),
                chunk_of=_opt_str(doc.get("chunk_of")),
                chunk_count=_opt_int(doc.get("chunk_count")),
                version=2 if category is not None else 1,
            )
        )
        labels.append(category)

    if parent_ids:
        found = set(
            session.scalars(
                select(Document.id).where(
                    Document.id.in_(parent_ids), Document.corpus_id == corpus_id
                )
            )
        )
        missing = sorted(parent_ids - found)
        if missing:
            raise InvalidInputError(
                f"parent_id {missing[0]} is not a document of this corpus."
            )

    if new_docs:
        session.add_all(new_docs)
        session.flush()
        _record_import_labels(session, new_docs, labels)
        session.add_all(Suggestion(document_id=d.id, category_id=c.id, status="ok", agent=IMPORT_ANNOTATOR,
                                   model_version="exported suggestion",
                                   reason="marked label_source = suggestion in the imported file")
                        for d, c in zip(new_docs, suggested) if c is not None)
        if bump:
            bump_documents_version(session, corpus_id)
            if any(c is not None for c in [*labels, *suggested]):
                bump_labels_version(session, corpus_id)
    return AddResult(
        added=len(new_docs),
        skipped_duplicates=len(duplicates),
        document_ids=[d.id for d in new_docs],
        duplicate_indices=duplicates,
    )


def _record_import_labels(
    session: Session, new_docs: Sequence[Document], labels: Sequence[Category | None]
) -> None:
    """Store import labels as decisions by annotator ``"import"`` (based on version 1)."""
    now = utcnow()
    rows = [
        {
            "document_id": doc.id,
            "category_id": category.id,
            "annotator": IMPORT_ANNOTATOR,
            "created_at": now,
            "based_on_version": 1,
            "suggestion_id": None,
            "note": "",
            "method": "import",
        }
        for doc, category in zip(new_docs, labels, strict=True)
        if category is not None
    ]
    if rows:
        session.execute(Decision.__table__.insert(), rows)


def get_document(store: Store, document_id: int) -> DocumentRow:
    """One document with its effective label. Raises NotFoundError."""
    rows = get_documents(store, [document_id])
    if not rows:
        raise NotFoundError("Document", document_id)
    return rows[0]


def document_sources(store: Store, corpus_id: int) -> dict[int, str]:
    """``{document id: source}`` of a corpus, without loading texts or labels (one narrow query)."""
    with store.session(readonly=True) as session:
        rows = session.execute(select(Document.id, Document.source).where(Document.corpus_id == corpus_id))
        return {int(i): src or "" for i, src in rows}


def get_documents(store: Store, document_ids: Sequence[int]) -> list[DocumentRow]:
    """Documents by id, in the order asked (unknown ids are left out)."""
    ids = [int(i) for i in document_ids]
    if not ids:
        return []
    with store.session(readonly=True) as session:
        corpus_ids = set(
            session.scalars(select(Document.corpus_id).where(Document.id.in_(ids)).distinct())
        )
        by_id: dict[int, DocumentRow] = {}
        for corpus_id in corpus_ids:
            stmt, _, _, _ = _document_select(corpus_id)
            names = _category_names(session, corpus_id)
            for doc, dec_cat, sug_cat in session.execute(stmt.where(Document.id.in_(ids))):
                by_id[doc.id] = _to_row(doc, dec_cat, sug_cat, names)
        return [by_id[i] for i in ids if i in by_id]


def source_chunks(store: Store, document_id: int) -> list[DocumentRow]:
    """All chunks cut from the same source document as this one (the document itself
    included), ordered by ``chunk_index``; just the document when it is not a chunk.
    Chunks share the corpus, ``source`` and ``chunk_of``. Raises NotFoundError."""
    with store.session(readonly=True) as session:
        doc = require(session, Document, document_id, "Document")
        if doc.chunk_of is None:
            ids = [doc.id]
        else:
            ids = list(
                session.scalars(
                    select(Document.id)
                    .where(
                        Document.corpus_id == doc.corpus_id,
                        Document.source == doc.source,
                        Document.chunk_of == doc.chunk_of,
                    )
                    .order_by(Document.chunk_index, Document.id)
                )
            )
    return get_documents(store, ids)


def list_documents(
    store: Store,
    corpus_id: int,
    *,
    category_id: int | None = None,
    unlabeled: bool = False,
    search: str | None = None,
    top_level_only: bool = False,
    offset: int = 0,
    limit: int | None = 50,
) -> DocumentPage:
    """A page of the corpus' documents ordered by id, each with its effective label.

    Filters: ``category_id`` (effective label is this category), ``unlabeled`` (no label at
    all), ``search`` (case-insensitive substring of title or text; bound LIKE with ``%``/``_``
    escaped), ``top_level_only`` (no chunks). ``limit=None`` returns every match.
    """
    if offset < 0 or (limit is not None and limit < 0):
        raise InvalidInputError("offset and limit must not be negative.")
    with store.session(readonly=True) as session:
        stmt, label_id, dec, sug = _document_select(corpus_id)
        if category_id is not None:
            stmt = stmt.where(label_id == category_id)
        if unlabeled:
            stmt = stmt.where(dec.category_id.is_(None), sug.category_id.is_(None))
        if search:
            pattern = like_pattern(search)
            stmt = stmt.where(
                or_(
                    Document.title.ilike(pattern, escape=LIKE_ESCAPE),
                    Document.text.ilike(pattern, escape=LIKE_ESCAPE),
                )
            )
        if top_level_only:
            stmt = stmt.where(Document.parent_id.is_(None))
        total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
        page = stmt.order_by(Document.id).offset(offset)
        if limit is not None:
            page = page.limit(limit)
        names = _category_names(session, corpus_id)
        items = [_to_row(doc, d, s, names) for doc, d, s in session.execute(page)]
        return DocumentPage(items=items, total=total, offset=offset, limit=limit)


def document_ids(store: Store, corpus_id: int, *, top_level_only: bool = False) -> list[int]:
    """Ids of the corpus' documents in ascending order."""
    with store.session(readonly=True) as session:
        stmt = select(Document.id).where(Document.corpus_id == corpus_id).order_by(Document.id)
        if top_level_only:
            stmt = stmt.where(Document.parent_id.is_(None))
        return list(session.scalars(stmt))


def update_document(
    store: Store,
    document_id: int,
    *,
    title: str | None = None,
    text: str | None = None,
    source: str | None = None,
    expected_version: int | None = None,
    editor: str | None = None,
) -> DocumentRow:
    """Edit a document's title/text/source. A text change re-hashes the document and bumps
    ``corpus.version`` (embeddings become stale), a title change ``corpus.updated_at`` (what caches of
    the corpus' titles are keyed on); a title or text change bumps the document's
    ``version``, so a label decision made on what was shown before is refused, and is recorded (what was edited,
    when, by ``editor`` when given) so that refusal names it. ``expected_version``:
    refuse the edit (VersionConflictError, naming the change) when the document changed since the caller loaded it.
    Raises NotFoundError, InvalidInputError (a blank new title or text), DuplicateError (the new text equals
    another document's)."""
    with store.session() as session:
        doc = require(session, Document, document_id, "Document")
        if expected_version is not None and doc.version != expected_version:
            raise version_conflict(session, document_id, expected_version)
        changed = False
        edited: list[str] = []
        if title is not None and title != doc.title:
            if not title.strip():
                raise InvalidInputError("A document's title must not be empty.")
            doc.title = title
            changed = True
            edited.append("title")
            # Not the documents' version (vectors embed the text only), but shown titles changed.
            session.execute(update(Corpus).where(Corpus.id == doc.corpus_id).values(updated_at=utcnow())
                            .execution_options(synchronize_session=False))
        if source is not None:
            doc.source = source
        if text is not None and text != doc.text:
            if not text.strip():
                raise InvalidInputError("A document's text must not be empty.")
            new_hash = sha256_hex(text)
            clash = session.scalar(
                select(Document.id).where(
                    Document.corpus_id == doc.corpus_id,
                    Document.content_hash == new_hash,
                    Document.id != document_id,
                )
            )
            if clash is not None:
                raise DuplicateError(f"Document {clash} already has exactly this text.")
            doc.text = text
            doc.content_hash = new_hash
            changed = True
            edited.append("text")
            session.flush()
            bump_documents_version(session, doc.corpus_id)
        if changed:
            doc.version += 1
            doc.edited, doc.edited_at, doc.edited_by = " and ".join(edited), utcnow(), editor or None
    return get_document(store, document_id)


@dataclass(frozen=True)
class DocumentDeletion:
    """What :func:`delete_document` did: the deleted document's title and the ids of the queries whose
    ground truth it was (now flagged)."""

    title: str
    flagged_queries: list[int]


def _ground_truth_query_ids(session: Session, document_id: int) -> list[int]:
    return list(session.scalars(select(QueryGroundTruth.query_id).where(QueryGroundTruth.document_id == document_id)
                                .order_by(QueryGroundTruth.query_id)))


def ground_truth_queries(store: Store, document_id: int) -> list[int]:
    """Ids of the queries (any query set) that have ``document_id`` in their ground truth."""
    with store.session(readonly=True) as session:
        return _ground_truth_query_ids(session, document_id)


def delete_document(store: Store, document_id: int, *, expected_version: int | None = None) -> DocumentDeletion:
    """Delete one document (with its chunks, labels and vectors) in one transaction. Queries whose
    ground truth held it lose it and are flagged, their ``error`` naming the deleted document, so a
    reviewer sees why their aspects no longer match. ``expected_version``: refuse (VersionConflictError)
    when the document changed since the caller loaded it. Bumps ``corpus.version``. Raises NotFoundError."""
    with store.session() as session:
        doc = require(session, Document, document_id, "Document")
        if expected_version is not None and doc.version != expected_version:
            raise version_conflict(session, document_id, expected_version)
        title, corpus_id = doc.title, doc.corpus_id
        queries = _ground_truth_query_ids(session, document_id)
        note = f"ground-truth document {title or '#' + str(document_id)!r} (#{document_id}) was deleted"
        for query in session.scalars(select(Query).where(Query.id.in_(queries))):
            query.error = f"{query.error}; {note}" if query.error else note
            if query.status == "ok":
                query.status = "flagged"
        session.execute(delete(Document).where(Document.id == document_id).execution_options(synchronize_session=False))
        bump_documents_version(session, corpus_id)
    return DocumentDeletion(title, queries)


def delete_documents(store: Store, corpus_id: int, document_ids: Sequence[int]) -> int:
    """Delete documents of this corpus (with their chunks, labels, vectors, ground-truth
    links); returns how many listed ids were deleted. Bumps ``corpus.version`` if any."""
    ids = [int(i) for i in document_ids]
    if not ids:
        return 0
    with store.session() as session:
        require(session, Corpus, corpus_id, "Corpus")
        result = session.execute(
            delete(Document)
            .where(Document.corpus_id == corpus_id, Document.id.in_(ids))
            .execution_options(synchronize_session=False)
        )
        deleted = int(result.rowcount or 0)  # type: ignore[attr-defined]
        if deleted:
            bump_documents_version(session, corpus_id)
        return deleted
