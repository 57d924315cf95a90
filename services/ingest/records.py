"""Records, issues and previews shared by every importer, plus the size limits.

An import never writes anything: readers turn uploaded bytes into an :class:`ImportPreview`
(the records that would be added, and one :class:`ImportIssue` per problem, located by row,
line or file). The UI shows the preview and commits ``preview.records`` only when the user
confirms.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from mrag_core.names import fold_name
from mrag_core.textio import ImportIssue, IngestError, Severity

__all__ = [
    "MAX_DOC_BYTES",
    "MAX_LABEL_CHARS",
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
    "surrogate_problem",
    "text_problem",
]

#: Largest single document (UTF-8 bytes of its text, or size of its file).
MAX_DOC_BYTES: int = 5 * 1024 * 1024
#: Largest upload (a table file, or the sum of a ZIP's/folder's document files).
MAX_TOTAL_BYTES: int = 200 * 1024 * 1024
#: Longest label, in characters once its spacing is collapsed: a label is a category name, which the store keeps in
#: 200 characters (``db.models.Category.name``; ``db.corpora`` refuses a longer one, and with it the whole import).
MAX_LABEL_CHARS: int = 200

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


_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_problem(value: str, what: str) -> str | None:
    """Why ``value`` (the ``what`` of a row: ``"text"``, ``"title"``, ``"label"``) cannot be stored: it holds a lone
    surrogate (a JSON escape such as ``"\\ud800"`` without its pair), which is not a character and cannot be
    written as UTF-8; None when it holds none."""
    m = _SURROGATE.search(value)
    if m is None:
        return None
    return (f"the {what} holds a lone surrogate (U+{ord(m.group()):04X}, character {m.start() + 1}), which is not "
            "a character: the file is damaged there; fix or remove it")


def text_problem(text: str, max_doc_bytes: int | None = MAX_DOC_BYTES) -> str | None:
    """Why a (normalised) document text cannot be imported, or None when it can.

    Empty texts, texts holding a lone surrogate (:func:`surrogate_problem`) and texts whose UTF-8 size exceeds
    ``max_doc_bytes`` are rejected; the message for the last suggests chunking.
    """
    if not text.strip():
        return "the document is empty"
    if (problem := surrogate_problem(text, "text")) is not None:
        return problem
    if max_doc_bytes is not None:
        size = len(text.encode("utf-8"))
        if size > max_doc_bytes:
            return (
                f"the document is {format_bytes(size)}, over the {format_bytes(max_doc_bytes)} "
                "limit per document; split it (turn on chunking) or import a smaller file"
            )
    return None


def _field_issues(value: str, what: str) -> tuple[str | None, list[tuple[Severity, str]]]:
    """A title or label as it can be stored, with what was wrong: None and an error when it holds a lone surrogate;
    else NUL characters (which PostgreSQL cannot store in text) removed, with a warning."""
    if (problem := surrogate_problem(value, what)) is not None:
        return None, [("error", problem)]
    if "\x00" not in value:
        return value, []
    n = value.count("\x00")
    return value.replace("\x00", ""), [("warning", f"{n} NUL character{'s' if n != 1 else ''} (\\x00) removed from the "
                                                  f"{what}: a database cannot store them")]


def _label_issues(label: str) -> tuple[str | None, list[tuple[Severity, str]]]:
    """``_field_issues`` of a label, then: a label with nothing visible is left out (a warning), one over
    :data:`MAX_LABEL_CHARS` is an error (``None`` returned for both)."""
    cleaned, issues = _field_issues(label, "label")
    if cleaned is None:
        return None, issues
    if not fold_name(cleaned):
        if cleaned.strip():  # invisible characters only (a blank label is no label: nothing to say)
            issues.append(("warning", f"the label {cleaned!r} has no visible character; imported without a label"))
        return None, issues
    n = len(" ".join(cleaned.split()))
    if n > MAX_LABEL_CHARS:
        issues.append(("error", f"the label is {n} characters long, over the {MAX_LABEL_CHARS} a category name may "
                                "have; shorten it"))
        return None, issues
    return cleaned, issues


def check_record(r: ImportRecord, max_doc_bytes: int | None = MAX_DOC_BYTES) -> tuple[ImportRecord | None,
                                                                                       list[ImportIssue]]:
    """One record as it can be stored, or None when it cannot (then at least one error), with its issues located
    at its ``source``: the text normalised (:func:`normalise_text`) and checked (:func:`text_problem`); a title or
    label holding a lone surrogate is an error, NUL characters are removed from them with a warning; a label with
    nothing visible is dropped with a warning, and one longer than :data:`MAX_LABEL_CHARS` is an error."""
    text = normalise_text(r.text)
    problem = text_problem(text, max_doc_bytes)
    if problem is not None:
        return None, [ImportIssue(r.source, problem, "error")]
    found: list[tuple[Severity, str]] = []
    title, title_issues = _field_issues(r.title, "title")
    found += title_issues
    parent = _field_issues(r.parent_title, "title")[0] if r.parent_title is not None else None
    label = r.label
    if r.label is not None:
        label, label_issues = _label_issues(r.label)
        found += label_issues
    issues = [ImportIssue(r.source, message, severity) for severity, message in found]
    if any(severity == "error" for severity, _ in found):
        return None, issues
    assert title is not None
    changed = (text, title, label, parent) != (r.text, r.title, r.label, r.parent_title)
    return (replace(r, text=text, title=title, label=label, parent_title=parent) if changed else r), issues


def check_records(
    records: Sequence[ImportRecord], max_doc_bytes: int | None = MAX_DOC_BYTES
) -> tuple[list[ImportRecord], list[ImportIssue]]:
    """Apply the document limits and checks of :func:`check_record` to every record: empty texts, texts over
    ``max_doc_bytes``, lone surrogates and labels over :data:`MAX_LABEL_CHARS` are rejected, NUL characters are
    removed from titles and labels.

    Returns the kept records (texts normalised with :func:`normalise_text`) and the issues, each located at its
    record's ``source``; an issue met in several records of one source (the parts of a chunked document) is listed
    once. ``max_doc_bytes=None`` disables the size cap (e.g. before :func:`services.ingest.chunking.apply_chunking`
    splits big documents).
    """
    kept: list[ImportRecord] = []
    issues: list[ImportIssue] = []
    for r in records:
        record, found = check_record(r, max_doc_bytes)
        issues.extend(issue for issue in found if issue not in issues)
        if record is not None:
            kept.append(record)
    return kept, issues
