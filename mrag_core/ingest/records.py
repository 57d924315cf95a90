"""Records, issues and previews shared by every importer, plus the size limits.

An import never writes anything: readers turn uploaded bytes into an :class:`ImportPreview`
(the records that would be added, and one :class:`ImportIssue` per problem, located by row,
line or file). The UI shows the preview and commits ``preview.records`` only when the user
confirms.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

__all__ = [
    "MAX_DOC_BYTES",
    "MAX_TOTAL_BYTES",
    "ImportIssue",
    "ImportPreview",
    "ImportRecord",
    "IngestError",
    "Severity",
    "check_records",
    "format_bytes",
    "in_source",
    "member_source",
    "normalise_text",
    "text_problem",
]

#: Largest single document (UTF-8 bytes of its text, or size of its file).
MAX_DOC_BYTES: int = 5 * 1024 * 1024
#: Largest upload (a table file, or the sum of a ZIP's/folder's document files).
MAX_TOTAL_BYTES: int = 200 * 1024 * 1024

Severity = Literal["error", "warning"]


class IngestError(ValueError):
    """A whole upload cannot be read (e.g. not JSON at all). Message is user-facing."""



@dataclass(frozen=True)
class ImportRecord:
    """One document ready to be added to a collection.

    ``source`` says where it came from (``"data.csv row 7"``, ``"notes.zip:physics/a.md"``).
    Chunked records carry their original title in ``parent_title``, their 0-based position
    in ``chunk_index`` and the number of parts in ``chunk_count``; unchunked records leave
    them ``None``. ``label_is_suggestion``: the file (an export of this app) says the label is a machine
    suggestion nobody decided on (``label_source = "suggestion"``); it is imported as a suggestion, not a label.
    """

    title: str
    text: str
    label: str | None
    source: str
    parent_title: str | None = None
    chunk_index: int | None = None
    chunk_count: int | None = None
    label_is_suggestion: bool = False  # the file marks ``label`` as a machine suggestion (label_source)


@dataclass(frozen=True)
class ImportIssue:
    """A problem found while reading: ``source`` is the file it is in (``"data.csv"``; a member of an archive
    as :func:`member_source` names it, ``"notes.zip:physics/a.md"``), ``location`` where in that file
    (``"row 7"``, ``"line 3"``; empty for the whole file). An issue of no one file (``"upload"``) has only a
    ``location``; one found after reading (limits, duplicates, labels) is located at its record's ``source``.

    ``error`` means the row/file was not imported; ``warning`` means it was imported but
    something was guessed or dropped.
    """

    location: str
    message: str
    severity: Severity = "error"
    source: str = ""

    @classmethod
    def of_file(cls, source: str, message: str, severity: Severity = "error") -> ImportIssue:
        """An issue about the whole file ``source`` (no location inside it)."""
        return cls("", message, severity, source)

    @property
    def where(self) -> str:
        """The file and the place in it, as shown to the user: ``"data.csv row 7"``, ``"notes.zip:a.md"``,
        ``"data.csv"`` (the whole file), ``"row 7"`` (no file named)."""
        return " ".join(part for part in (self.source, self.location) if part)

    def __str__(self) -> str:
        return f"{self.severity.upper()} {self.where}: {self.message}"


def member_source(archive: str, member: str) -> str:
    """How a member of an archive is named, in issues and records' ``source``: ``"notes.zip:physics/a.md"``."""
    return f"{archive}:{member}"


def in_source(issues: Iterable[ImportIssue], source: str, name: str | None = None) -> list[ImportIssue]:
    """``issues`` met reading the file ``source``, each naming it: an issue without a source gets ``source``, and
    one located at the file itself (its ``location`` is ``name``, the name the reader was given, by default
    ``source``) is about the whole file (no location). Issues that name a source already are kept as they are."""
    name = source if name is None else name
    return [issue if issue.source else replace(issue, source=source, location="" if issue.location == name
                                               else issue.location) for issue in issues]


@dataclass
class ImportPreview:
    """What an import would add: records plus every issue met on the way.

    ``n_rows_read`` counts rows/lines/files examined; ``n_skipped`` those that produced no
    record (an error, or every part of it left out as a duplicate), so that without chunking
    ``len(records) + n_skipped == n_rows_read``. ``n_duplicates`` counts the records (parts, when chunked)
    left out as duplicates of another in the upload or of a text already in the corpus.
    """

    records: list[ImportRecord] = field(default_factory=list)
    issues: list[ImportIssue] = field(default_factory=list)
    n_rows_read: int = 0
    n_skipped: int = 0
    n_duplicates: int = 0

    @property
    def errors(self) -> list[ImportIssue]:
        """Issues of severity ``error``."""
        return [i for i in self.issues if i.severity == "error"]

    @property
    def warnings(self) -> list[ImportIssue]:
        """Issues of severity ``warning``."""
        return [i for i in self.issues if i.severity == "warning"]

    @property
    def has_errors(self) -> bool:
        """True when at least one row or file was rejected."""
        return any(i.severity == "error" for i in self.issues)

    def label_counts(self) -> dict[str | None, int]:
        """Number of records per label (``None`` = unlabelled)."""
        return dict(Counter(r.label for r in self.records))

    def summary(self) -> str:
        """One line for the UI: ``"12 documents ready, 1 skipped (1 duplicate) of 13 read, 0 errors, 1 warning"``.

        When long documents were split, the ready parts come from fewer rows than they number:
        ``"40 documents ready from 12 of 13 read, 1 skipped, 3 duplicate parts left out, ..."``.
        """
        n, n_e, n_w, n_d = len(self.records), len(self.errors), len(self.warnings), self.n_duplicates
        ready = f"{n} document{'s' if n != 1 else ''} ready"
        if any(r.chunk_index is not None for r in self.records):
            kept = self.n_rows_read - self.n_skipped
            counts = (f"{ready} from {kept} of {self.n_rows_read} read, {self.n_skipped} skipped"
                      + (f", {n_d} duplicate part{'s' if n_d != 1 else ''} left out" if n_d else ""))
        else:
            dup = f" ({n_d} duplicate{'s' if n_d != 1 else ''})" if n_d else ""
            counts = f"{ready}, {self.n_skipped} skipped{dup} of {self.n_rows_read} read"
        return f"{counts}, {n_e} error{'s' if n_e != 1 else ''}, {n_w} warning{'s' if n_w != 1 else ''}"

    @staticmethod
    def combine(previews: Iterable[ImportPreview]) -> ImportPreview:
        """Concatenate several previews (e.g. several uploaded files) into one."""
        out = ImportPreview()
        for p in previews:
            out.records.extend(p.records)
            out.issues.extend(p.issues)
            out.n_rows_read += p.n_rows_read
            out.n_skipped += p.n_skipped
            out.n_duplicates += p.n_duplicates
        return out


def format_bytes(n: int) -> str:
    """Human-readable size: ``"512 B"``, ``"4.2 KB"``, ``"5.0 MB"``."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def normalise_text(text: str) -> str:
    """Unify line endings to ``\\n``, drop NUL characters and strip outer whitespace."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").strip()


def text_problem(text: str, max_doc_bytes: int | None = MAX_DOC_BYTES) -> str | None:
    """Why a (normalised) document text cannot be imported, or None when it can.

    Empty texts and texts whose UTF-8 size exceeds ``max_doc_bytes`` are rejected; the
    message for the latter suggests chunking.
    """
    if not text.strip():
        return "the document is empty"
    if max_doc_bytes is not None:
        size = len(text.encode("utf-8"))
        if size > max_doc_bytes:
            return (
                f"the document is {format_bytes(size)}, over the {format_bytes(max_doc_bytes)} "
                "limit per document; split it (turn on chunking) or import a smaller file"
            )
    return None


def check_records(
    records: Sequence[ImportRecord], max_doc_bytes: int | None = MAX_DOC_BYTES
) -> tuple[list[ImportRecord], list[ImportIssue]]:
    """Apply the document limits: empty texts and texts over ``max_doc_bytes`` are rejected.

    Returns the kept records (texts normalised with :func:`normalise_text`) and one error
    per rejected record, located at its ``source``. ``max_doc_bytes=None`` disables the cap
    (e.g. before :func:`mrag_core.ingest.chunking.apply_chunking` splits big documents).
    """
    kept: list[ImportRecord] = []
    issues: list[ImportIssue] = []
    for r in records:
        text = normalise_text(r.text)
        problem = text_problem(text, max_doc_bytes)
        if problem is not None:
            issues.append(ImportIssue(r.source, problem, "error"))
            continue
        kept.append(r if text == r.text else replace(r, text=text))
    return kept, issues
