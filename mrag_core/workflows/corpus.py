"""Corpus import and export, joining :mod:`mrag_core.ingest` / :mod:`mrag_core.export` and the store.

Import is three steps, matching the Corpus Import page (nothing is written before the last):

1. :func:`read_upload` turns an upload (table with a column mapping, ZIP of ``.txt``/``.md``,
   MRAG Wikipedia articles, a ZIP of the MRAG legal / accident topic layout, plain text files)
   into an :class:`~mrag_core.ingest.ImportPreview` (:func:`read_topic_folder` does the same
   for a topic-layout folder on this machine);
2. :func:`prepare_import` applies the options (chunking, document limits, de-duplication within
   the upload and against the target corpus) and returns the final preview with every issue;
3. :func:`import_records` writes categories and documents in ONE transaction
   (``db.add_documents``); a corpus created for the import is removed again if that fails.
   Chunks keep the link to their source document (``chunk_of`` = its title, ``chunk_index``,
   ``chunk_count``; all chunks of one source share ``source``).

Export (:func:`export_documents`) writes each document with its effective label: the latest human
decision (``label_source="human"``), else, when ``include_suggestions``, the latest machine
suggestion (``label_source="suggestion"``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import db
from mrag_core.annotate.types import fold_name
from mrag_core.wording import counted
from mrag_core import export as exporter
from mrag_core.ingest import (
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
    "SOURCE_KINDS",
    "ChunkOptions",
    "ImportResult",
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
    document_ids: list[int]


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

    ``table`` needs ``mapping`` (see :func:`mrag_core.ingest.suggest_mapping`): one for every file, or one per
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
    """Normalised content hashes (:func:`mrag_core.ingest.content_hash`) of a corpus' texts."""
    page = db.list_documents(store, corpus_id, limit=None)
    return {content_hash(d.text) for d in page.items}


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
    """``records`` with each label spelled as the first label of its :func:`~mrag_core.annotate.types.fold_name`
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


def import_records(
    store: db.Store,
    records: Sequence[ImportRecord],
    *,
    corpus_id: int | None = None,
    new_name: str | None = None,
    description: str = "",
    deduplicate: bool = True,
) -> ImportResult:
    """Write ``records`` into an existing corpus (``corpus_id``) or a new one (``new_name``).

    Labels become categories (created as needed) and import decisions by ``"import"``, except labels the file
    marks as machine suggestions (``label_source = "suggestion"``, as exported), which become suggestions; the
    documents and their labels are added in one transaction. When a corpus was created here and
    adding fails, the corpus is deleted again, so nothing is left half-written.

    Raises ``ValueError`` (neither/both targets, nothing to import), ``db.DuplicateError`` (corpus
    name taken, or a duplicate text with ``deduplicate=False``), ``db.NotFoundError`` (unknown
    corpus), ``db.InvalidInputError``.
    """
    if (corpus_id is None) == (new_name is None or not new_name.strip()):
        raise ValueError("Choose either an existing corpus or a name for a new corpus.")
    if not records:
        raise ValueError("There is nothing to import: the preview has no documents.")
    created = False
    if corpus_id is None:
        corpus = db.create_corpus(store, str(new_name), description)
        created = True
    else:
        corpus = db.get_corpus(store, corpus_id)
    try:
        result = db.add_documents(store, corpus.id, [_record_doc(r) for r in records], dedupe=deduplicate)
    except Exception:
        if created:
            db.delete_corpus(store, corpus.id)
        raise
    labels = {r.label for r in records if r.label}
    return ImportResult(
        corpus_id=corpus.id,
        corpus_name=corpus.name,
        created_corpus=created,
        added=result.added,
        skipped_duplicates=result.skipped_duplicates,
        n_categories=len(labels),
        document_ids=list(result.document_ids),
    )


# --------------------------------------------------------------------------- deleting


def work_in_progress(store: db.Store, corpus_id: int) -> list[str]:
    """What some process (this one, the app, the CLI) is doing to the corpus now, as its heartbeats say
    (:mod:`db.liveness`): index builds, evaluation runs (by name), a pre-annotation and query generations into its
    query sets (by name), each naming its process, and a leased work since when. Deleting the corpus under them
    would make them fail half-way; empty when nothing runs."""
    from mrag_core.workflows.annotation import preannotation_lease
    from mrag_core.workflows.querysets import generation_lease

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
    """The corpus exported as ``fmt`` (a key of :data:`mrag_core.export.EXPORT_FORMATS`).

    Raises :class:`mrag_core.export.ExportError` (e.g. unlabelled documents for the benchmark
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
