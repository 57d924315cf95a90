"""Writing an import in chunks, all or nothing: a corpus hidden until it is published.

A large import is not written in one transaction: that would hold the database's write lock for as long as it
takes (every write session takes it: SQLite's, PostgreSQL's advisory one, MySQL's named one), and every other
writer (an index build saving its vectors, another import, a label decision) would give up after the busy timeout
of 10 s. Instead:

1. :func:`begin_import` creates the corpus the documents go into, with ``import_owner`` set (the importing process,
   ``host pid N #token``) and a lease ``import:<corpus id>`` (an ``app_markers`` row whose ``updated_at`` is the
   importer's heartbeat, :mod:`db.liveness`), both in one transaction. Such a corpus is hidden from every listing
   and lookup (``db.list_corpora``, ``db.get_corpus``, ``db.get_corpus_by_name``, ``db.corpus_footprints``), and
   its name stays taken: a second import under it is refused while the first one lives.
2. :func:`add_import_documents` writes one bounded chunk of documents (with their categories and labels) per
   transaction, so other writers get the lock between chunks; a chunk is all or nothing, and is refused (nothing
   written, :class:`ImportLostError`) once the import is no longer this owner's.
3. :func:`finish_import` publishes it in one short transaction: a new corpus by clearing ``import_owner``; an import
   into an existing corpus (whose documents were written into a hidden corpus of their own) by moving its
   documents, labels and categories over, leaving out texts that the corpus got meanwhile.

Until (3) commits nobody sees any of it. An import that fails or is stopped (Ctrl+C) is discarded by its process
(:func:`abandon_import`); one whose process was killed (``kill -9``, a lost server) is discarded by the next
:func:`discard_abandoned_imports` (run by ``db.open_store`` and before every import) once its lease has expired
or its process is known to be gone (:func:`db.liveness.process_gone`: on the same host, at once). Discarding
deletes the documents in chunks too, so a large leftover does not lock others out either.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from db._common import sha256_hex
from db.categories import _ensure_categories
from db.corpora import CorpusInfo, _clean_name, _corpus_info, bump_documents_version, bump_labels_version, name_taken
from db.documents import AddResult, insert_documents
from db.engine import Store
from db.errors import LIVE_WINDOW_S, DuplicateError, NotFoundError, StoreError
from db.liveness import heartbeat_age, new_owner, process_gone
from db.models import AppMarker, Category, Corpus, Decision, Document, Suggestion, utcnow

__all__ = [
    "DISCARD_CHUNK",
    "corpus_texts",
    "ImportLostError",
    "PublishedImport",
    "abandon_import",
    "add_import_documents",
    "begin_import",
    "discard_abandoned_imports",
    "finish_import",
    "import_lease",
]

#: Documents deleted per transaction when an import is discarded.
DISCARD_CHUNK = 2000


class ImportLostError(StoreError):
    """The import is no longer this process' to write: its hidden corpus was discarded meanwhile (this process
    fell silent past the lease window and another one cleaned it up) or deleted. Nothing of it is kept."""


@dataclass(frozen=True)
class PublishedImport:
    """What :func:`finish_import` published: the ``corpus`` as it is now, how many documents were ``added`` and how
    many were left out as ``skipped_duplicates`` (texts the corpus got while the import was being written)."""

    corpus: CorpusInfo
    added: int
    skipped_duplicates: int


def import_lease(corpus_id: int) -> str:
    """The name of the lease (an ``app_markers`` row) an import writing corpus ``corpus_id`` holds."""
    return f"import:{int(corpus_id)}"


def _abandoned(session: Session, corpus: Corpus) -> bool:
    """Whether the import writing ``corpus`` has ended without publishing or discarding it: its lease is gone or
    another's, silent for longer than the lease window, or its process is known to have ended."""
    owner = corpus.import_owner or ""
    marker = session.get(AppMarker, import_lease(corpus.id))
    if marker is None or marker.value != owner:
        return True
    age = heartbeat_age(marker.updated_at)
    return age is None or age > LIVE_WINDOW_S or process_gone(owner)


def begin_import(store: Store, name: str, owner: str, description: str = "") -> int:
    """Create the hidden corpus an import writes into, named ``name`` (the new corpus' name, or a name of its own
    for an import into an existing corpus), owned by ``owner`` (``host pid N #token``, :func:`db.new_owner`), with
    its lease, in one transaction; returns its id. Discards an abandoned import holding that name first.
    Raises DuplicateError (a corpus of that name exists, or a live import writes one), InvalidInputError."""
    cleaned = _clean_name(name, "corpus")
    discard_abandoned_imports(store)
    try:
        with store.session() as session:
            clash = session.scalar(select(Corpus).where(Corpus.name == cleaned))
            if clash is not None:
                raise DuplicateError(name_taken(clash))
            corpus = Corpus(name=cleaned, description=description or "", import_owner=owner)
            session.add(corpus)
            session.flush()
            now = utcnow()
            session.add(AppMarker(name=import_lease(corpus.id), value=owner, created_at=now, updated_at=now))
            return int(corpus.id)
    except IntegrityError as exc:  # a leftover lease row of a reused id, or a lost race on the name
        raise DuplicateError(f"A corpus named {cleaned!r} already exists or is being imported now.") from exc


def _owned(session: Session, corpus_id: int, owner: str) -> Corpus:
    corpus = session.get(Corpus, corpus_id)
    if corpus is None or corpus.import_owner != owner:
        raise ImportLostError("The import was discarded while it was being written (its process fell silent for "
                              f"longer than {LIVE_WINDOW_S:.0f} s and another one cleaned it up, or its corpus was "
                              "deleted); nothing of it was kept. Import the file again.")
    return corpus


def add_import_documents(store: Store, corpus_id: int, owner: str, docs: Sequence[Mapping[str, Any]], *,
                         dedupe: bool = True, first_index: int = 0) -> AddResult:
    """Write one chunk of an import's documents (the mappings of :func:`db.add_documents`) into its hidden corpus,
    in one transaction that also beats the import's lease. A text already written by this import is skipped
    (``dedupe``) or refused (DuplicateError naming document ``first_index`` + its position + 1). Raises
    ImportLostError when the import is no longer ``owner``'s, InvalidInputError, BusyError (nothing written)."""
    hashes = {sha256_hex(d["text"]) for d in docs if isinstance(d.get("text"), str)}
    with store.session() as session:
        _owned(session, corpus_id, owner)
        stored = set(session.scalars(select(Document.content_hash).where(
            Document.corpus_id == corpus_id, Document.content_hash.in_(hashes)))) if hashes else set()
        result = insert_documents(session, corpus_id, docs, stored, dedupe=dedupe, bump=False, first_index=first_index,
                                  stored_means="the same as an earlier document of this import")
        session.execute(update(AppMarker).where(AppMarker.name == import_lease(corpus_id), AppMarker.value == owner)
                        .values(updated_at=utcnow()))
        return result


def finish_import(store: Store, corpus_id: int, owner: str, *, into: int | None = None,
                  dedupe: bool = True) -> PublishedImport:
    """Publish the import in one transaction: the hidden corpus itself (``into`` None), or its documents, labels and
    categories moved into the existing corpus ``into`` (categories matched by name, created as needed; the hidden
    corpus is deleted). Texts ``into`` got meanwhile are left out (``dedupe``) or refuse the whole import
    (DuplicateError). Bumps the target's versions as :func:`db.add_documents` does. Raises ImportLostError,
    NotFoundError (``into`` was deleted meanwhile), DuplicateError; nothing is published then."""
    with store.session() as session:
        staged = _owned(session, corpus_id, owner)
        session.execute(delete(AppMarker).where(AppMarker.name == import_lease(corpus_id)))
        labelled = session.scalar(select(Decision.id).join(Document, Document.id == Decision.document_id)
                                  .where(Document.corpus_id == corpus_id).limit(1)) is not None or session.scalar(
            select(Suggestion.id).join(Document, Document.id == Suggestion.document_id)
            .where(Document.corpus_id == corpus_id).limit(1)) is not None
        if into is None:
            staged.import_owner = None
            session.flush()
            added = _count(session, corpus_id)
            bump_documents_version(session, corpus_id)
            if labelled:
                bump_labels_version(session, corpus_id)
            session.flush()
            session.refresh(staged)
            return PublishedImport(_corpus_info(session, staged), added, 0)
        target = session.get(Corpus, into)
        if target is None or target.import_owner is not None:
            raise NotFoundError("Corpus", into)
        skipped = _leave_out_clashes(session, corpus_id, into, dedupe)
        categories = list(session.scalars(select(Category).where(Category.corpus_id == corpus_id)))
        for mine, theirs in zip(categories, _ensure_categories(session, into, [c.name for c in categories])):
            for table in (Decision, Suggestion):
                session.execute(update(table).where(table.category_id == mine.id).values(category_id=theirs.id)
                                .execution_options(synchronize_session=False))
        moved = session.execute(update(Document).where(Document.corpus_id == corpus_id).values(corpus_id=into)
                                .execution_options(synchronize_session=False))
        added = int(moved.rowcount or 0)  # type: ignore[attr-defined]
        session.execute(delete(Corpus).where(Corpus.id == corpus_id).execution_options(synchronize_session=False))
        if added:
            bump_documents_version(session, into)
            if labelled:
                bump_labels_version(session, into)
        session.flush()
        session.refresh(target)
        return PublishedImport(_corpus_info(session, target), added, skipped)


def _count(session: Session, corpus_id: int) -> int:
    return int(session.scalar(select(func.count()).where(Document.corpus_id == corpus_id)) or 0)


def _leave_out_clashes(session: Session, staged_id: int, into: int, dedupe: bool) -> int:
    """Delete the staged documents whose text corpus ``into`` holds already (it got them while the import was
    written); returns how many. Without ``dedupe`` the first one refuses the import (DuplicateError)."""
    theirs = aliased(Document)
    clashes = session.execute(
        select(Document.id, Document.title)
        .join(theirs, (theirs.content_hash == Document.content_hash) & (theirs.corpus_id == into))
        .where(Document.corpus_id == staged_id).order_by(Document.id)).all()
    if clashes and not dedupe:
        raise DuplicateError(f"Document {clashes[0][1]!r} is already in the corpus (it was added while the import "
                             "was being written).")
    ids = [int(i) for i, _ in clashes]
    for start in range(0, len(ids), DISCARD_CHUNK):
        session.execute(delete(Document).where(Document.id.in_(ids[start:start + DISCARD_CHUNK]))
                        .execution_options(synchronize_session=False))
    return len(ids)


def abandon_import(store: Store, corpus_id: int, owner: str) -> None:
    """Discard this owner's unpublished import: its documents (in chunks), its hidden corpus and its lease. Does
    nothing when it is no longer ``owner``'s (published, or discarded by another process already)."""
    _discard(store, corpus_id, owner)


def _discard(store: Store, corpus_id: int, owner: str) -> bool:
    """Delete the hidden corpus ``corpus_id`` while it is ``owner``'s: documents first, ``DISCARD_CHUNK`` a
    transaction (cascading to their labels), then the corpus and its lease. False when it was not ``owner``'s."""
    while True:
        with store.session() as session:
            corpus = session.get(Corpus, corpus_id)
            if corpus is None or corpus.import_owner != owner:
                return False
            ids = list(session.scalars(select(Document.id).where(Document.corpus_id == corpus_id)
                                       .order_by(Document.id).limit(DISCARD_CHUNK)))
            if ids:
                session.execute(delete(Document).where(Document.id.in_(ids))
                                .execution_options(synchronize_session=False))
                continue
            session.execute(delete(Corpus).where(Corpus.id == corpus_id).execution_options(synchronize_session=False))
            session.execute(delete(AppMarker).where(AppMarker.name == import_lease(corpus_id)))
            return True


def discard_abandoned_imports(store: Store) -> list[str]:
    """Discard every import whose process ended without publishing or discarding it (killed, or its server lost):
    its lease expired, or its process is known to be gone. Each is first taken over (this process becomes its
    owner, so two cleaners never delete one corpus at once), then deleted in chunks. Returns the names of the
    corpora discarded (a hidden corpus of an import into an existing corpus has a name of its own)."""
    with store.session(readonly=True) as session:
        pending = list(session.scalars(select(Corpus).where(Corpus.import_owner.is_not(None))))
        candidates = [c.id for c in pending if _abandoned(session, c)]
    discarded: list[str] = []
    for corpus_id in candidates:
        me = new_owner()
        with store.session() as session:  # checked again under the write lock: it may have been published
            corpus = session.get(Corpus, corpus_id)
            if corpus is None or corpus.import_owner is None or not _abandoned(session, corpus):
                continue
            corpus.import_owner = me
            name = corpus.name
            session.execute(delete(AppMarker).where(AppMarker.name == import_lease(corpus_id)))
            now = utcnow()
            session.add(AppMarker(name=import_lease(corpus_id), value=me, created_at=now, updated_at=now))
        if _discard(store, corpus_id, me):
            discarded.append(name)
    return discarded


def corpus_texts(store: Store, corpus_id: int, batch: int = 1000) -> Iterator[str]:
    """The texts of a corpus' documents (id order), fetched ``batch`` at a time in one read-only transaction: what
    an import into it de-duplicates against, without every document and its labels in memory at once."""
    with store.session(readonly=True) as session:
        yield from session.scalars(select(Document.text).where(Document.corpus_id == corpus_id)
                                   .order_by(Document.id).execution_options(yield_per=batch))
