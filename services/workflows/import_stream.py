"""An import read as a stream: its preview, then its import, in memory that does not grow with the upload.

:func:`~services.workflows.corpus.prepare_import` works on a preview holding every record; a table of a million rows
then took about 58 times its size in memory (5.16 GB for an 89 MB CSV). A :class:`StreamedImport` reads the same
upload twice instead, row by row (:func:`services.ingest.iter_table`: CSV, JSONL and Parquet are streamed, from a
path on disk or bytes in memory), and applies the same options to each row as it comes (chunking, the document
limits, de-duplication, the labels' spellings):

1. :meth:`StreamedImport.report` reads it for the preview: an :class:`ImportReport` counts everything
   (``n_rows_read``, ``n_skipped``, ``n_duplicates``, ``n_records``, errors, warnings, documents per label) but keeps
   only the first :data:`RECORDS_KEPT` records and :data:`ISSUES_KEPT` issues (each naming its file and row);
2. :meth:`StreamedImport.records` reads it again for :func:`~services.workflows.corpus.import_records`, which
   writes it in chunks: the same records, in the same order.

What is kept per row does not grow with it: de-duplication looks each text's hash up in a temporary SQLite file
(:class:`SeenTexts`), not in memory. A file found unreadable half-way (a CSV quote never closed near its end) is
left out whole, as :func:`~services.ingest.read_table` leaves it out: the preview is read again without it.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from services.annotate.types import fold_name
from services.ingest import (
    ColumnMapping,
    ImportIssue,
    ImportPreview,
    ImportRecord,
    IngestError,
    apply_chunking,
    check_records,
    content_hash,
)
from services.ingest.dedupe import _same_text
from services.ingest.records import MAX_DOC_BYTES
from services.ingest.streams import TableData, TextSource
from services.ingest.tabular import TableRow, iter_table

__all__ = ["ISSUES_KEPT", "RECORDS_KEPT", "ImportReport", "LabelSpellings", "SeenTexts", "StreamedImport",
           "TableFile"]

#: Records an :class:`ImportReport` keeps to show (the page shows 500).
RECORDS_KEPT = 500
#: Issues an :class:`ImportReport` keeps to show; all of them are counted.
ISSUES_KEPT = 1000


@dataclass(frozen=True)
class TableFile:
    """One table of an upload: its ``name``, its ``data`` (bytes, a path on disk, or a
    :class:`~services.ingest.streams.TextSource` opened once), its format and column ``mapping`` (None: its columns
    cannot be read; it is left out with ``error``, as :func:`~services.workflows.corpus.unreadable_table` says)."""

    name: str
    data: TableData | TextSource
    fmt: str
    mapping: ColumnMapping | None
    error: ImportIssue | None = None


@dataclass
class ImportReport:
    """The preview of a streamed import: every count, the first :data:`RECORDS_KEPT` ``records`` and the first
    :data:`ISSUES_KEPT` ``issues``. Reads as :class:`~services.ingest.ImportPreview` does (``summary``,
    ``label_counts``, ``errors``, ``warnings``), with the counts of all: ``n_records``, ``n_errors``, ``n_warnings``.
    Without chunking ``n_records + n_skipped == n_rows_read``. ``refused`` names the files left out whole, with why."""

    records: list[ImportRecord] = field(default_factory=list)
    issues: list[ImportIssue] = field(default_factory=list)
    n_rows_read: int = 0
    n_skipped: int = 0
    n_duplicates: int = 0
    n_records: int = 0
    n_errors: int = 0
    n_warnings: int = 0
    labels: Counter[str | None] = field(default_factory=Counter)
    chunked: bool = False
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def errors(self) -> list[ImportIssue]:
        """The errors kept (``n_errors`` counts all)."""
        return [i for i in self.issues if i.severity == "error"]

    @property
    def warnings(self) -> list[ImportIssue]:
        """The warnings kept (``n_warnings`` counts all)."""
        return [i for i in self.issues if i.severity == "warning"]

    @property
    def has_errors(self) -> bool:
        return self.n_errors > 0

    @property
    def n_issues(self) -> int:
        return self.n_errors + self.n_warnings

    def label_counts(self) -> dict[str | None, int]:
        """Documents per label (``None`` = unlabelled), of all records."""
        return dict(self.labels)

    def add_issues(self, issues: Iterable[ImportIssue]) -> None:
        for issue in issues:
            if issue.severity == "error":
                self.n_errors += 1
            else:
                self.n_warnings += 1
            if len(self.issues) < ISSUES_KEPT:
                self.issues.append(issue)

    def add_record(self, record: ImportRecord) -> None:
        self.n_records += 1
        self.labels[record.label] += 1
        self.chunked = self.chunked or record.chunk_index is not None
        if len(self.records) < RECORDS_KEPT:
            self.records.append(record)

    def summary(self) -> str:
        """The line :meth:`ImportPreview.summary` writes, from the counts of all records and issues:
        ``"12 documents ready, 1 skipped (1 duplicate) of 13 read, 0 errors, 1 warning"``."""
        n, n_e, n_w, n_d = self.n_records, self.n_errors, self.n_warnings, self.n_duplicates
        ready = f"{n} document{'s' if n != 1 else ''} ready"
        if self.chunked:
            kept = self.n_rows_read - self.n_skipped
            counts = (f"{ready} from {kept} of {self.n_rows_read} read, {self.n_skipped} skipped"
                      + (f", {n_d} duplicate part{'s' if n_d != 1 else ''} left out" if n_d else ""))
        else:
            dup = f" ({n_d} duplicate{'s' if n_d != 1 else ''})" if n_d else ""
            counts = f"{ready}, {self.n_skipped} skipped{dup} of {self.n_rows_read} read"
        return f"{counts}, {n_e} error{'s' if n_e != 1 else ''}, {n_w} warning{'s' if n_w != 1 else ''}"


class SeenTexts:
    """The texts an import has taken so far (and those its corpus holds), by their normalised hash
    (:func:`~services.ingest.content_hash`), in a temporary SQLite database on disk (deleted when closed), so that
    de-duplicating a million rows keeps nothing per row in memory. :meth:`take` answers what :func:`dedupe` would."""

    def __init__(self, existing_hashes: Iterable[str] = ()) -> None:
        self._db = sqlite3.connect("")  # a private temporary database on disk
        self._db.execute("PRAGMA cache_size = -2048")  # at most about 2 MB of its pages in memory
        self._db.execute("CREATE TABLE seen (h BLOB PRIMARY KEY, title TEXT, source TEXT, label TEXT) WITHOUT ROWID")
        self._db.executemany("INSERT OR IGNORE INTO seen VALUES (?, NULL, NULL, NULL)",
                             ((bytes.fromhex(h),) for h in existing_hashes))

    def take(self, record: ImportRecord) -> ImportIssue | None:
        """None when ``record``'s text is new (it is taken), else the warning that leaves it out (as
        :func:`~services.ingest.dedupe` words it: already in the collection, or the same text as an earlier one)."""
        key = bytes.fromhex(content_hash(record.text))
        cursor = self._db.execute("INSERT OR IGNORE INTO seen VALUES (?, ?, ?, ?)",
                                  (key, record.title, record.source, record.label))
        if cursor.rowcount == 1:
            return None
        title, source, label = self._db.execute("SELECT title, source, label FROM seen WHERE h = ?", (key,)).fetchone()
        if source is None:
            return ImportIssue(record.source, f"{record.title!r} is already in the collection (same text); skipped",
                               "warning")
        return ImportIssue(record.source, _same_text(record, ImportRecord(title, "", label, source)), "warning")

    def close(self) -> None:
        self._db.close()


class LabelSpellings:
    """What :func:`~services.workflows.corpus.same_labels` does, one record at a time: each label spelled as the
    first label of its :func:`~services.annotate.types.fold_name` form (the target corpus' ``existing`` labels
    first), with one warning per other spelling."""

    def __init__(self, existing: Sequence[str] = ()) -> None:
        self._canonical = {fold_name(name): name for name in existing}
        self._warned: set[str] = set()

    def spell(self, record: ImportRecord) -> tuple[ImportRecord, ImportIssue | None]:
        if not record.label or not record.label.strip():
            return record, None
        label = " ".join(record.label.split())
        spelling = self._canonical.setdefault(fold_name(label), label)
        issue = None
        if spelling != label and label not in self._warned:
            self._warned.add(label)
            issue = ImportIssue(record.source, f"label {label!r} is imported as {spelling!r}: they differ only in case "
                                "or spacing, which the annotators cannot tell apart", "warning")
        return (record if spelling == record.label else replace(record, label=spelling)), issue


@dataclass(frozen=True)
class _Step:
    """One row of the upload, prepared: the records it gives (its parts, less those left out), the issues met, and
    whether it counts as a row read."""

    records: list[ImportRecord]
    issues: list[ImportIssue]
    counted: bool
    duplicates: int = 0
    left_out: bool = False  # a row read whose every part was left out (an error or a duplicate)


class _Refused(Exception):
    """A file turned out unreadable half-way (IngestError); the stream is read again without it."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name, self.message = name, message


class StreamedImport:
    """An upload with its import options, read as a stream each time it is asked for: :meth:`report` (the preview)
    and :meth:`records` (what :func:`~services.workflows.corpus.import_records` writes). ``tables`` are read row by
    row; ``preview`` (the other kinds, read whole by their readers) is streamed through the same options.
    ``chunking`` is a :class:`~services.workflows.corpus.ChunkOptions` (validated by the caller) or None."""

    def __init__(self, *, tables: Sequence[TableFile] = (), preview: ImportPreview | None = None,
                 chunking: Any = None, deduplicate: bool = True, existing_hashes: Iterable[str] = (),
                 max_doc_bytes: int | None = MAX_DOC_BYTES, existing_labels: Sequence[str] = ()) -> None:
        self.tables = list(tables)
        self.preview = preview
        self.chunking = chunking
        self.deduplicate = deduplicate
        self.existing_hashes = frozenset(existing_hashes)
        self.max_doc_bytes = max_doc_bytes
        self.existing_labels = list(existing_labels)
        self.refused: dict[str, str] = {}

    # ------------------------------------------------------------------ reading
    def _rows(self) -> Iterator[tuple[str, Any]]:
        """``(file name, TableRow)`` of every table, then the preview's issues and records; a table refused before
        gives its one error."""
        for table in self.tables:
            if table.name in self.refused:
                yield table.name, TableRow(None, [ImportIssue.of_file(table.name, self.refused[table.name])],
                                           counted=False)
                continue
            if table.mapping is None:
                yield table.name, TableRow(None, [table.error] if table.error else [], counted=False)
                continue
            try:
                for row in iter_table(table.data, table.fmt, table.mapping, table.name, max_doc_bytes=None):
                    yield table.name, row
            except IngestError as exc:
                raise _Refused(table.name, str(exc).removeprefix(f"{table.name}: ")) from exc
        if self.preview is not None:
            if self.preview.issues:
                yield "", TableRow(None, list(self.preview.issues), counted=False)
            for record in self.preview.records:
                yield "", TableRow(record, [])
            for _ in range(self.preview.n_skipped):
                yield "", TableRow(None, [])

    def _steps(self) -> Iterator[_Step]:
        """Every row with the options applied, in order (as :func:`prepare_import` applies them to a preview)."""
        seen = SeenTexts(self.existing_hashes) if self.deduplicate else None
        labels = LabelSpellings(self.existing_labels)
        chunking = self.chunking
        try:
            for _, row in self._rows():
                if row.record is None:
                    yield _Step([], list(row.issues), row.counted, left_out=row.counted)
                    continue
                issues = list(row.issues)
                parts = [row.record] if chunking is None else apply_chunking(
                    [row.record], method=chunking.method, size=chunking.size, overlap=chunking.overlap,
                    min_chars=chunking.min_chars, max_chars=chunking.max_chars)
                kept, limit_issues = check_records(parts, self.max_doc_bytes)
                issues.extend(limit_issues)
                out: list[ImportRecord] = []
                duplicates = 0
                for part in kept:
                    issue = seen.take(part) if seen is not None else None
                    if issue is not None:
                        issues.append(issue)
                        duplicates += 1
                        continue
                    part, spelled = labels.spell(part)
                    if spelled is not None:
                        issues.append(spelled)
                    out.append(part)
                yield _Step(out, issues, row.counted, duplicates, left_out=not out)
        finally:
            if seen is not None:
                seen.close()

    # ------------------------------------------------------------------ the two passes
    def report(self) -> ImportReport:
        """The preview: everything counted, the first records and issues kept. A file found unreadable half-way is
        left out whole (one error naming it and why) and the upload is read again without it."""
        while True:
            report = ImportReport(refused=dict(self.refused))
            try:
                for step in self._steps():
                    report.add_issues(step.issues)
                    for record in step.records:
                        report.add_record(record)
                    report.n_duplicates += step.duplicates
                    if step.counted:
                        report.n_rows_read += 1
                        report.n_skipped += step.left_out
            except _Refused as refused:
                self.refused[refused.name] = refused.message
                continue
            return report

    def records(self) -> Iterator[ImportRecord]:
        """The records to import, read again (the files :meth:`report` refused are left out). A file that cannot be
        read now although it could before (changed meanwhile) raises IngestError: the import is then discarded."""
        try:
            for step in self._steps():
                yield from step.records
        except _Refused as refused:
            raise IngestError(f"{refused.name}: {refused.message} (the file changed since its preview; nothing was "
                              "imported)") from None

