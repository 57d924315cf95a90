"""Corpus import and export, joining :mod:`services.ingest` / :mod:`services.export` and the store.

Import is three steps, matching the Corpus Import page (nothing is written before the last):

1. :func:`read_upload` turns an upload (table with a column mapping, ZIP of ``.txt``/``.md``,
   MRAG Wikipedia articles, a ZIP of the MRAG legal / accident topic layout, plain text files)
   into an :class:`~services.ingest.ImportPreview` (:func:`read_topic_folder` does the same
   for a topic-layout folder on this machine);
2. :func:`prepare_import` applies the options (chunking, document limits, de-duplication within
   the upload and against the target corpus) and returns the final preview with every issue;
3. :func:`import_records` writes categories and documents all or nothing: in bounded chunks into a corpus
   nobody else sees, published in one last transaction (``db.imports``), so a long import neither locks other
   writers out nor leaves half a corpus behind when it fails, is stopped or is killed.
   Chunks keep the link to their source document (``chunk_of`` = its title, ``chunk_index``,
   ``chunk_count``; all chunks of one source share ``source``).

Export (:func:`export_documents`) writes each document with its effective label: the latest human
decision (``label_source="human"``), else, when ``include_suggestions``, the latest machine
suggestion (``label_source="suggestion"``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import db
from mrag_core.wording import counted
from services import export as exporter
from services.annotate.types import fold_name
from services.heartbeat import Heartbeat
from services.ingest import (
    MAX_DOC_BYTES,
    ColumnMapping,
    ImportIssue,
    ImportPreview,
    ImportRecord,
    IngestError,
    apply_chunking,
    check_records,
    content_hash,
    dedupe,
    guess_format,
    preview_topic_layout,
    preview_wikipedia_articles,
    read_table,
    read_text_files,
    read_text_zip,
    sniff_columns,
)

__all__ = [
    "list_corpora",
    "get_corpus",
    "get_corpus_by_name",
    "list_categories",
    "list_documents",
    "get_documents",
    "get_document",
    "update_document",
    "delete_document",
    "rename_corpus",
    "delete_corpus",
    "corpus_footprints",
    "category_usage",
    "ground_truth_queries",
    "SOURCE_KINDS",
    "ChunkOptions",
    "ImportResult",
    "ImportStopped",
    "SourceKind",
    "corpus_text_hashes",
    "export_documents",
    "export_rows",
    "import_records",
    "prepare_import",
    "read_topic_folder",
    "read_upload",
    "same_labels",
    "source_signature",
    "table_files",
    "unreadable_table",
]

SourceKind = Literal["table", "zip", "wikipedia", "topics", "text"]

#: Source kinds with the label the UI shows for them.
SOURCE_KINDS: dict[str, str] = {
    "table": "Table: CSV / JSON / JSONL / Parquet (map the columns)",
    "zip": "ZIP of .txt / .md files (folder name = label)",
    "wikipedia": "MRAG benchmark Wikipedia articles (.json / .json.bz2)",
    "topics": "MRAG benchmark legal / accident layout (<category>/<category>_<topic>.json; folder or ZIP)",
    "text": "Plain .txt / .md files",
}


@dataclass(frozen=True)
class ChunkOptions:
    """How to split long documents: ``method`` ``"chars"`` (``size`` with ``overlap``) or
    ``"paragraphs"`` (merged until ``min_chars``, never above ``max_chars``)."""

    method: Literal["chars", "paragraphs"] = "paragraphs"
    size: int = 1500
    overlap: int = 150
    min_chars: int = 800
    max_chars: int = 4000

    def validate(self) -> None:
        """Raise ``ValueError`` with a user-facing message for impossible settings."""
        if self.method not in ("chars", "paragraphs"):
            raise ValueError(f"Unknown chunking method {self.method!r}; use 'chars' or 'paragraphs'.")
        if self.method == "chars":
            if self.size < 1:
                raise ValueError("The chunk size must be at least 1 character.")
            if not 0 <= self.overlap < self.size:
                raise ValueError(
                    f"The overlap must be between 0 and the chunk size minus one ({self.size - 1})."
                )
        elif not 0 < self.min_chars <= self.max_chars:
            raise ValueError("Need 0 < minimum chunk size <= maximum chunk size.")


@dataclass(frozen=True)
class ImportResult:
    """Outcome of :func:`import_records`."""

    corpus_id: int
    corpus_name: str
    created_corpus: bool
    added: int
    skipped_duplicates: int
    n_categories: int


# --------------------------------------------------------------------------- reading


def read_upload(
    kind: str,
    files: Sequence[tuple[str, bytes]],
    *,
    mapping: ColumnMapping | Sequence[ColumnMapping | None] | None = None,
    table_format: str | None = None,
    label_from_folder: bool = True,
    label: str | None = None,
) -> ImportPreview:
    """Read uploaded ``(name, bytes)`` files of one ``kind`` into a preview; never raises for bad
    content (problems become issues naming their file, its row or line when they are about one:
    ``ImportIssue.where`` reads ``"b.csv row 2"``, ``"notes.zip:physics/a.md"``).

    ``table`` needs ``mapping`` (see :func:`services.ingest.suggest_mapping`): one for every file, or one per
    file (a sequence as long as ``files``: tables with different columns; None for a table whose columns cannot be
    read, which is left out with an error naming it and why, as :func:`unreadable_table` says); its format is
    ``table_format`` or guessed from each file name. ``zip`` labels by folder when
    ``label_from_folder``. ``topics`` reads ZIPs of the legal / accident topic layout (label =
    category folder; a folder on disk goes through :func:`read_topic_folder`). ``text`` gives
    every file the optional ``label``.
    """
    if kind not in SOURCE_KINDS:
        raise ValueError(f"Unknown source kind {kind!r}; use one of {', '.join(SOURCE_KINDS)}.")
    if not files:
        return ImportPreview(issues=[ImportIssue("upload", "no file was uploaded", "error")])
    # Limits are applied in prepare_import (after optional chunking), so read without the cap.
    if kind == "text":
        return read_text_files(list(files), label=label, max_doc_bytes=None)
    previews: list[ImportPreview] = []
    per_file = list(mapping) if mapping is not None and not isinstance(mapping, ColumnMapping) else None
    if per_file is not None and len(per_file) != len(files):
        raise ValueError(f"{counted(len(per_file), 'column mapping')} given for {counted(len(files), 'file')}; give "
                         "one per file.")
    for index, (name, data) in enumerate(files):
        if kind == "table":
            if mapping is None:
                raise ValueError("A table upload needs a column mapping (at least the text column).")
            fmt = table_format or guess_format(name)
            if fmt is None:
                previews.append(ImportPreview(issues=[ImportIssue.of_file(
                    name, "cannot tell the table format from the file name; choose it explicitly")]))
                continue
            its = per_file[index] if per_file is not None else mapping
            if its is None:
                previews.append(unreadable_table(data, fmt, name))
                continue
            assert isinstance(its, ColumnMapping)
            previews.append(read_table(data, fmt, its, name, max_doc_bytes=None))
        elif kind == "zip":
            previews.append(read_text_zip(data, name, label_from_folder=label_from_folder, max_doc_bytes=None))
        elif kind == "topics":
            previews.append(preview_topic_layout(data, name, max_doc_bytes=None))
        else:
            previews.append(preview_wikipedia_articles(data, name, max_doc_bytes=None))
    return ImportPreview.combine(previews)


def table_files(files: Sequence[tuple[str, bytes]], mapping: ColumnMapping | Sequence[ColumnMapping | None], *,
                table_format: str | None = None) -> list[Any]:
    """The uploaded tables as :class:`~services.workflows.import_stream.TableFile` (read row by row by a
    :class:`~services.workflows.import_stream.StreamedImport`), with what :func:`read_upload` makes of each: its
    format (``table_format`` or guessed from its name) and mapping (one for all, or one per file: None for a table
    whose columns cannot be read, left out with the error :func:`unreadable_table` words); a file whose format
    cannot be told is left out with an error."""
    from services.workflows.import_stream import TableFile

    per_file = list(mapping) if not isinstance(mapping, ColumnMapping) else [mapping] * len(files)
    if len(per_file) != len(files):
        raise ValueError(f"{counted(len(per_file), 'column mapping')} given for {counted(len(files), 'file')}; give "
                         "one per file.")
    out: list[Any] = []
    for (name, data), its in zip(files, per_file):
        fmt = table_format or guess_format(name)
        if fmt is None:
            out.append(TableFile(name, data, "csv", None, ImportIssue.of_file(
                name, "cannot tell the table format from the file name; choose it explicitly")))
        elif its is None:
            out.append(TableFile(name, data, fmt, None, unreadable_table(data, fmt, name).issues[0]))
        else:
            out.append(TableFile(name, data, fmt, its))
    return out


def unreadable_table(data: bytes, fmt: str, name: str) -> ImportPreview:
    """The preview of a table whose columns cannot be read (so it has no column mapping): no record, no row read
    (the counts still add up, ready + skipped = read), and one error located at ``name`` saying that the file is
    left out and why. Raises ``ValueError`` when its columns can be read after all: it needs a mapping then."""
    try:
        columns = sniff_columns(data, fmt, name)
    except IngestError as exc:  # its message starts with the file name already
        why = str(exc).removeprefix(f"{name}: ")
        return ImportPreview(issues=[ImportIssue.of_file(name, f"the file cannot be read, so it is left out: {why}")])
    raise ValueError(f"{name} needs a column mapping (its columns: {', '.join(columns)}).")


def read_topic_folder(path: str | Path) -> ImportPreview:
    """Preview the legal / accident topic layout from a folder (or a ``.zip`` /
    ``.tar(.bz2)`` archive) on this machine; never raises for bad content (a missing folder
    or a malformed file becomes an issue). ``~`` is expanded."""
    text = str(path).strip()
    if not text:
        return ImportPreview(issues=[ImportIssue("folder", "no folder was given", "error")])
    return preview_topic_layout(Path(text).expanduser(), text, max_doc_bytes=None)


def source_signature(path: str | Path) -> str:
    """A cheap fingerprint of a file or folder on disk (names, sizes, modification times of
    its files), so a cached preview of it is re-read when anything changes; ``""`` when the
    path does not exist."""
    root = Path(str(path).strip()).expanduser()
    try:
        if root.is_file():
            st_ = root.stat()
            return f"{st_.st_size}:{st_.st_mtime_ns}"
        if not root.is_dir():
            return ""
        digest = hashlib.sha256()
        for p in sorted(root.rglob("*")):
            if p.is_file():
                st_ = p.stat()
                digest.update(f"{p.relative_to(root).as_posix()}\0{st_.st_size}\0{st_.st_mtime_ns}\n".encode())
        return digest.hexdigest()
    except OSError:
        return ""


def corpus_text_hashes(store: db.Store, corpus_id: int) -> set[str]:
    """Normalised content hashes (:func:`services.ingest.content_hash`) of a corpus' texts (read a batch at a
    time: one hash per document is held, not the documents)."""
    return {content_hash(text) for text in db.corpus_texts(store, corpus_id)}


def prepare_import(
    preview: ImportPreview,
    *,
    chunking: ChunkOptions | None = None,
    deduplicate: bool = True,
    existing_hashes: set[str] | frozenset[str] = frozenset(),
    max_doc_bytes: int | None = MAX_DOC_BYTES,
    existing_labels: Sequence[str] = (),
) -> ImportPreview:
    """Apply the import options to a read preview; returns a NEW preview (input untouched).

    Order: chunking (when given), then the per-document limits (empty / over ``max_doc_bytes``:
    errors), then de-duplication (when ``deduplicate``: later copies within the upload and texts
    already in ``existing_hashes`` are dropped with a warning), then the labels: one that differs from another
    (or from one of the target corpus' ``existing_labels``) only in case or spacing takes that one's spelling, with a
    warning per spelling (:func:`same_labels`; the annotators cannot tell such categories apart, so pre-annotation
    refused the corpus). The counts add up: a record read
    whose every part is left out (an error or a duplicate) is added to ``n_skipped``, so without
    chunking ``len(records) + n_skipped == n_rows_read``; ``n_duplicates`` says how many records
    (parts, when chunked) were left out as duplicates. Raises ``ValueError`` for invalid chunking
    settings.
    """
    issues = list(preview.issues)
    if chunking is not None:
        chunking.validate()
    groups: list[list[ImportRecord]] = []  # the parts each read record gives, after the limits
    for record in preview.records:
        parts = [record] if chunking is None else apply_chunking(
            [record], method=chunking.method, size=chunking.size, overlap=chunking.overlap,
            min_chars=chunking.min_chars, max_chars=chunking.max_chars,
        )  # fmt: skip
        kept, limit_issues = check_records(parts, max_doc_bytes)
        issues.extend(limit_issues)
        groups.append(kept)
    records = [part for group in groups for part in group]
    n_duplicates = 0
    if deduplicate:
        records, dup_issues = dedupe(records, existing_hashes)
        issues.extend(dup_issues)
        n_duplicates = len(dup_issues)
    survivors = {id(r) for r in records}  # dedupe returns the records it keeps, not copies
    n_left_out = sum(1 for group in groups if not any(id(part) in survivors for part in group))
    records, label_issues = same_labels(records, existing_labels)
    issues.extend(label_issues)
    return ImportPreview(records=records, issues=issues, n_rows_read=preview.n_rows_read,
                         n_skipped=preview.n_skipped + n_left_out, n_duplicates=preview.n_duplicates + n_duplicates)


def same_labels(records: Sequence[ImportRecord], existing_labels: Sequence[str] = ()
                ) -> tuple[list[ImportRecord], list[ImportIssue]]:
    """``records`` with each label spelled as the first label of its :func:`~services.annotate.types.fold_name`
    form, an existing label (``existing_labels``, the target corpus' categories) first, then the records in order;
    a warning per label spelled otherwise, located at its first record. Records without a label are kept as they are."""
    canonical = {fold_name(name): name for name in existing_labels}
    out: list[ImportRecord] = []
    issues: list[ImportIssue] = []
    warned: set[str] = set()
    for record in records:
        if not record.label or not record.label.strip():
            out.append(record)
            continue
        label = " ".join(record.label.split())
        spelling = canonical.setdefault(fold_name(label), label)
        if spelling != label and label not in warned:
            warned.add(label)
            issues.append(ImportIssue(record.source, f"label {label!r} is imported as {spelling!r}: they differ only "
                                      "in case or spacing, which the annotators cannot tell apart", "warning"))
        out.append(record if spelling == record.label else replace(record, label=spelling))
    return out, issues


# --------------------------------------------------------------------------- writing


def _record_doc(record: ImportRecord) -> dict[str, Any]:
    return {
        "title": record.title,
        "text": record.text,
        "label": None if record.label_is_suggestion else record.label,
        "suggested_label": record.label if record.label_is_suggestion else None,
        "source": record.source,
        "chunk_index": record.chunk_index,
        "chunk_of": record.parent_title,
        "chunk_count": record.chunk_count,
    }


#: An import is written in chunks of at most this many documents...
IMPORT_CHUNK_ROWS = 1000
#: ...and at most about this many bytes of text, each chunk in a transaction of its own (:mod:`db.imports`).
IMPORT_CHUNK_BYTES = 4 * 1024 * 1024
#: The time a chunk's transaction should take: later chunks are made smaller (down to ``MIN_CHUNK_ROWS``) when
#: writing is slow, so the write lock is held for well under the busy timeout of the writers waiting for it.
CHUNK_TARGET_S = 0.5
MIN_CHUNK_ROWS = 50
#: How often a chunk is tried again when another writer held the database past the busy timeout.
CHUNK_TRIES = 5
#: On SQLite, after each chunk the import leaves the write lock free for this share of the time the chunk held it
#: (at least ``SQLITE_PAUSE_S[0]``, at most ``SQLITE_PAUSE_S[1]`` seconds). SQLite queues no waiting writer: each
#: polls the lock every 50 to 100 ms, and one that polled while the import held it would find it held again and
#: again. PostgreSQL's and MySQL's locks serve waiting writers in turn, so no pause is needed there.
SQLITE_PAUSE_SHARE = 0.3
SQLITE_PAUSE_S = (0.02, 0.2)


class ImportStopped(Exception):
    """The import was stopped (its ``cancel`` event was set, or its lease was lost) before it was published; nothing
    of it was kept."""


class _Chunks:
    """``records`` taken in chunks of at most :attr:`rows` records and about ``size`` characters of text (at least one
    record each); :meth:`took` adapts :attr:`rows` so that writing a chunk takes about ``target_s`` seconds (at least
    :data:`MIN_CHUNK_ROWS` rows, at most ``rows``): on a slow or busy database the chunks get smaller, so the write lock
    is never held for long, and grow back when writing is quick again."""

    def __init__(self, records: Iterable[ImportRecord], rows: int, size: int, target_s: float) -> None:
        self._records = iter(records)
        self.max_rows = self.rows = rows
        self.size = size
        self.target_s = target_s

    def __iter__(self) -> Iterator[list[ImportRecord]]:
        while True:
            chunk: list[ImportRecord] = []
            chars = 0
            for record in self._records:
                chunk.append(record)
                chars += len(record.text)
                if len(chunk) >= self.rows or chars >= self.size:
                    break
            if not chunk:
                return
            yield chunk

    def took(self, seconds: float, n: int) -> None:
        """Writing the last chunk (``n`` records) took ``seconds``: size the next one for :attr:`target_s`."""
        if seconds > 0 and n:
            fit = int(n * self.target_s / seconds)
            self.rows = max(MIN_CHUNK_ROWS, min(self.max_rows, fit, 2 * self.rows))


def _write_chunk(store: db.Store, hidden: int, owner: str, docs: list[dict[str, Any]], *, dedupe: bool,
                 first_index: int) -> db.AddResult:
    """One chunk in one transaction, tried again (up to :data:`CHUNK_TRIES` times) while another writer holds the
    database past the busy timeout: the import waits and goes on rather than failing."""
    return db.when_free(lambda: db.add_import_documents(store, hidden, owner, docs, dedupe=dedupe,
                                                        first_index=first_index), CHUNK_TRIES)


def import_records(
    store: db.Store,
    records: Iterable[ImportRecord],
    *,
    corpus_id: int | None = None,
    new_name: str | None = None,
    description: str = "",
    deduplicate: bool = True,
    progress: Callable[[int], None] | None = None,
    cancel: threading.Event | None = None,
) -> ImportResult:
    """Write ``records`` (any iterable: read lazily, one chunk at a time) into an existing corpus (``corpus_id``) or a
    new one (``new_name``), all or nothing.

    Labels become categories (created as needed) and import decisions by ``"import"``, except labels the file
    marks as machine suggestions (``label_source = "suggestion"``, as exported), which become suggestions. The
    documents are written in chunks of at most :data:`IMPORT_CHUNK_ROWS` documents (and :data:`IMPORT_CHUNK_BYTES` of
    text; fewer while writing one takes longer than :data:`CHUNK_TARGET_S`), each in a short transaction of its own,
    into a corpus nobody else sees (:mod:`db.imports`; a new corpus' name is taken from the start), under the
    import's lease and heartbeat; other writers (an index build, another import) wait between chunks instead of
    failing. The last transaction publishes it (a new corpus) or moves it into the
    existing corpus. Any failure, a stop (``cancel``, Ctrl+C, a page stopped: the exception propagates) or a kill
    leaves nothing: the process discards what it wrote, and what a killed process wrote is discarded by the next
    start (``db.open_store``) or import. ``progress(n)`` is called with the documents written so far after each chunk.

    Raises ``ValueError`` (neither/both targets, nothing to import), ``db.DuplicateError`` (corpus
    name taken, or a duplicate text with ``deduplicate=False``), ``db.NotFoundError`` (unknown
    corpus), ``db.InvalidInputError``, :class:`ImportStopped`, ``db.ImportLostError``, ``db.BusyError``.
    """
    if (corpus_id is None) == (new_name is None or not new_name.strip()):
        raise ValueError("Choose either an existing corpus or a name for a new corpus.")
    owner = db.new_owner()
    if corpus_id is None:
        hidden = db.when_free(lambda: db.begin_import(store, str(new_name), owner, description), CHUNK_TRIES)
    else:
        target = db.get_corpus(store, corpus_id)  # NotFoundError
        hidden = db.when_free(lambda: db.begin_import(
            store, f"(import {owner.rsplit('#', 1)[-1]} into #{target.id})", owner), CHUNK_TRIES)
    lost = threading.Event()
    labels: set[str] = set()
    written = skipped = 0
    try:
        with Heartbeat(lambda: db.beat_lease(store, db.import_lease(hidden), owner), db.BEAT_EVERY_S,
                       on_lost=lost.set):
            chunks = _Chunks(records, IMPORT_CHUNK_ROWS, IMPORT_CHUNK_BYTES, CHUNK_TARGET_S)
            for chunk in chunks:
                if lost.is_set() or (cancel is not None and cancel.is_set()):
                    raise ImportStopped("The import was stopped before it was complete; nothing of it was kept.")
                docs = [_record_doc(r) for r in chunk]
                held = time.perf_counter()
                result = _write_chunk(store, hidden, owner, docs, dedupe=deduplicate, first_index=written + skipped)
                held = time.perf_counter() - held
                chunks.took(held, len(chunk))
                if store.is_sqlite:
                    time.sleep(min(max(held * SQLITE_PAUSE_SHARE, SQLITE_PAUSE_S[0]), SQLITE_PAUSE_S[1]))
                written += result.added
                skipped += result.skipped_duplicates
                labels.update(r.label for r in chunk if r.label)
                if progress is not None:
                    progress(written)
            if written + skipped == 0:
                raise ValueError("There is nothing to import: the preview has no documents.")
            published = db.when_free(lambda: db.finish_import(store, hidden, owner, into=corpus_id,
                                                              dedupe=deduplicate), CHUNK_TRIES)
    except BaseException:
        try:
            db.abandon_import(store, hidden, owner)
        except Exception:  # noqa: BLE001 - the failure is what propagates; the next start discards the rest
            pass
        raise
    return ImportResult(
        corpus_id=published.corpus.id,
        corpus_name=published.corpus.name,
        created_corpus=corpus_id is None,
        added=published.added,
        skipped_duplicates=skipped + published.skipped_duplicates,
        n_categories=len(labels),
    )


# --------------------------------------------------------------------------- deleting


def work_in_progress(store: db.Store, corpus_id: int) -> list[str]:
    """What some process (this one, the app, the CLI) is doing to the corpus now, as its heartbeats say
    (:mod:`db.liveness`): index builds, evaluation runs (by name), a pre-annotation and query generations into its
    query sets (by name), each naming its process, and a leased work since when. Deleting the corpus under them
    would make them fail half-way; empty when nothing runs."""
    from services.workflows.annotation import preannotation_lease
    from services.workflows.querysets import generation_lease

    out = [f"index #{r.id} ({r.model_name}, layer {r.layer}) is being built ({r.process})"
           for r in db.list_embedding_runs(store, corpus_id) if r.live]
    out += [f"{db.work_title('evaluation run', r.id, r.name)} is running ({r.process})"
            for r in db.list_eval_runs(store, corpus_id=corpus_id) if r.live]
    lease = db.lease_info(store, preannotation_lease(corpus_id))
    if lease is not None:
        out.append(f"it is being pre-annotated ({lease.describe()})")
    for qs in db.list_query_sets(store, corpus_id):
        lease = db.lease_info(store, generation_lease(qs.id))
        if lease is not None:
            out.append(f"queries are being generated into {db.work_title('query set', qs.id, qs.name)} "
                       f"({lease.describe()})")
    return out


def describe_footprint(corpus: db.CorpusInfo, foot: db.CorpusFootprint) -> str:
    """What deleting ``corpus`` removes, in words (the confirmation under Manage corpora on the Corpus Import page,
    and the CLI): ``96 documents, 12 categories, 1 query set (24 queries), 1 index (0.6 MB of vectors), 2 evaluation
    runs``."""
    return (f"{counted(corpus.n_documents, 'document')}, {counted(corpus.n_categories, 'category', 'categories')}, "
            f"{counted(foot.n_query_sets, 'query set')} ({counted(foot.n_queries, 'query', 'queries')}), "
            f"{counted(foot.n_indexes, 'index', 'indexes')} ({foot.vector_bytes / 1e6:.1f} MB of vectors), "
            f"{counted(foot.n_eval_runs, 'evaluation run')}")


# --------------------------------------------------------------------------- export


def export_rows(store: db.Store, corpus_id: int, *, include_suggestions: bool = True) -> list[dict[str, Any]]:
    """Every document of the corpus as ``{title, text, label, label_source}`` (id order).

    ``label_source`` is ``"human"`` for a human decision (including labels that came with the
    import), ``"suggestion"`` for a machine suggestion nobody has decided on yet (only when
    ``include_suggestions``; else such documents are unlabelled), None for no label.
    """
    labels = db.effective_labels(store, corpus_id)
    rows: list[dict[str, Any]] = []
    for doc in db.list_documents(store, corpus_id, limit=None).items:
        eff = labels.get(doc.id)
        if eff is not None and eff.source == "decision":
            label, source = eff.category, "human"
        elif eff is not None and include_suggestions:
            label, source = eff.category, "suggestion"
        else:
            label, source = None, None
        rows.append({"title": doc.title, "text": doc.text, "label": label, "label_source": source})
    return rows


def export_documents(
    store: db.Store,
    corpus_id: int,
    fmt: str,
    *,
    include_suggestions: bool = True,
    unlabeled: Literal["error", "skip"] = "error",
    progress: Callable[[str], None] | None = None,
) -> bytes:
    """The corpus exported as ``fmt`` (a key of :data:`services.export.EXPORT_FORMATS`).

    Raises :class:`services.export.ExportError` (e.g. unlabelled documents for the benchmark
    format with ``unlabeled="error"``).
    """
    if progress is not None:
        progress("reading documents")
    rows = export_rows(store, corpus_id, include_suggestions=include_suggestions)
    if not rows:
        raise exporter.ExportError("the corpus has no documents to export")
    if fmt == "benchmark":
        return exporter.export_benchmark_json(rows, unlabeled=unlabeled)
    return exporter.export(rows, fmt)


# Re-exported for the page (so it needs a single import for errors).
ExportError = exporter.ExportError
__all__ += ["ExportError", "IngestError"]


# --------------------------------------------------------------------------- the store, for the pages


def list_corpora(store: db.Store) -> list[db.CorpusInfo]:
    """The stored corpora, by name (:func:`db.list_corpora`)."""
    return db.list_corpora(store)


def get_corpus(store: db.Store, corpus_id: int) -> db.CorpusInfo:
    """The corpus ``corpus_id`` with its counts and version (raises ``NotFoundError``) (:func:`db.get_corpus`)."""
    return db.get_corpus(store, corpus_id)


def get_corpus_by_name(store: db.Store, name: str) -> db.CorpusInfo:
    """The corpus called ``name`` (raises ``NotFoundError``) (:func:`db.get_corpus_by_name`)."""
    return db.get_corpus_by_name(store, name)


def list_categories(store: db.Store, corpus_id: int) -> list[db.CategoryInfo]:
    """The categories of a corpus (:func:`db.list_categories`)."""
    return db.list_categories(store, corpus_id)


def list_documents(
    store: db.Store,
    corpus_id: int,
    *,
    category_id: int | None = None,
    unlabeled: bool = False,
    search: str | None = None,
    top_level_only: bool = False,
    offset: int = 0,
    limit: int | None = 50,
) -> db.DocumentPage:
    """A page of a corpus' documents (by category, unlabelled, a search, top-level only) (:func:`db.list_documents`)."""
    return db.list_documents(
        store,
        corpus_id,
        category_id=category_id,
        unlabeled=unlabeled,
        search=search,
        top_level_only=top_level_only,
        offset=offset,
        limit=limit,
    )


def get_documents(store: db.Store, document_ids: Sequence[int]) -> list[db.DocumentRow]:
    """The documents ``document_ids``, in that order (missing ones left out) (:func:`db.get_documents`)."""
    return db.get_documents(store, document_ids)


def get_document(store: db.Store, document_id: int) -> db.DocumentRow:
    """The document ``document_id`` (raises ``NotFoundError``) (:func:`db.get_document`)."""
    return db.get_document(store, document_id)


def update_document(
    store: db.Store,
    document_id: int,
    *,
    title: str | None = None,
    text: str | None = None,
    source: str | None = None,
    expected_version: int | None = None,
    editor: str | None = None,
) -> db.DocumentRow:
    """Edit a document's title, text or source (``expected_version`` guards against a lost edit)
    (:func:`db.update_document`)."""
    return db.update_document(
        store,
        document_id,
        title=title,
        text=text,
        source=source,
        expected_version=expected_version,
        editor=editor,
    )


def delete_document(store: db.Store, document_id: int, *, expected_version: int | None = None) -> db.DocumentDeletion:
    """Delete a document (``expected_version`` guards against deleting an edited one) (:func:`db.delete_document`)."""
    return db.delete_document(store, document_id, expected_version=expected_version)


def rename_corpus(store: db.Store, corpus_id: int, new_name: str, description: str | None = None) -> db.CorpusInfo:
    """Rename a corpus (and change its description) (:func:`db.rename_corpus`)."""
    return db.rename_corpus(store, corpus_id, new_name, description)


def delete_corpus(store: db.Store, corpus_id: int) -> None:
    """Delete a corpus with everything stored for it (:func:`db.delete_corpus`)."""
    return db.delete_corpus(store, corpus_id)


def corpus_footprints(store: db.Store) -> dict[int, db.CorpusFootprint]:
    """Per corpus id: its query sets, queries, indexes and runs (what deleting it removes)
    (:func:`db.corpus_footprints`)."""
    return db.corpus_footprints(store)


def category_usage(store: db.Store, category_id: int) -> db.CategoryUsage:
    """Where a category is used: documents, suggestions, ground truth (:func:`db.category_usage`)."""
    return db.category_usage(store, category_id)


def ground_truth_queries(store: db.Store, document_id: int) -> list[int]:
    """The ids of the queries whose ground truth holds the document (:func:`db.ground_truth_queries`)."""
    return db.ground_truth_queries(store, document_id)
