"""Importing documents from tables: JSON, JSONL, CSV (and Parquet).

Two steps, matching the UI: :func:`sniff_columns` lists the columns of an upload so the user
can map them (:func:`suggest_mapping` proposes a mapping), then :func:`read_table` turns every
row into an :class:`~mrag_core.ingest.records.ImportRecord` or a located
:class:`~mrag_core.ingest.records.ImportIssue`.

Accepted shapes: JSON is a list of objects or ``{"documents": [...]}`` (also ``"records"``,
``"data"``, ``"articles"``, ``"items"``); JSONL is one object per line; CSV has a header row and
its delimiter (``,`` ``;`` tab ``|``) is sniffed; a quoted field that is never closed refuses the
file, naming the line where it starts (read leniently, it would take in the rest of the file as
one value); a CSV cell that an export neutralised as a spreadsheet formula (``'=...``) loses that quote
(:func:`mrag_core.csv_cells.restore`). bz2/gzip-compressed uploads are decompressed transparently (the authors'
``wikipedia_articles_v1.json.bz2`` reads as JSON). Locations are ``"row N"`` (JSON, CSV,
Parquet; 1-based data rows) or ``"line N"`` (JSONL), in the file the issue's ``source`` names.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Literal

from mrag_core.csv_cells import restore
from mrag_core.ingest.encoding import decode_bytes
from mrag_core.ingest.records import (
    MAX_DOC_BYTES,
    MAX_TOTAL_BYTES,
    ImportIssue,
    ImportPreview,
    ImportRecord,
    IngestError,
    format_bytes,
    in_source,
    normalise_text,
    text_problem,
)
from mrag_core.jsonlines import json_lines, loads

__all__ = [
    "ColumnMapping",
    "TableFormat",
    "fallback_title",
    "guess_format",
    "read_table",
    "sniff_columns",
    "suggest_mapping",
]

TableFormat = Literal["json", "jsonl", "csv", "parquet"]
_FORMATS: tuple[str, ...] = ("json", "jsonl", "csv", "parquet")
_WRAPPER_KEYS = ("documents", "records", "data", "articles", "items", "rows")


@dataclass(frozen=True)
class ColumnMapping:
    """Which columns hold the text (required), the title and the label (optional)."""

    text: str
    title: str | None = None
    label: str | None = None


@dataclass
class _Rows:
    """Rows of a table: ``(location, row or None when already reported)``."""

    columns: list[str]
    rows: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)
    issues: list[ImportIssue] = field(default_factory=list)


def guess_format(name: str) -> TableFormat | None:
    """Table format from a file name (``.json``, ``.jsonl``/``.ndjson``, ``.csv``/``.tsv``,
    ``.parquet``; a trailing ``.bz2``/``.gz`` is ignored), or None."""
    low = name.lower().removesuffix(".bz2").removesuffix(".gz")
    suffix = PurePath(low).suffix
    return {
        ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv",
        ".tsv": "csv", ".txt": None, ".parquet": "parquet", ".pq": "parquet",
    }.get(suffix)  # type: ignore[return-value]


def _check_format(fmt: str) -> None:
    if fmt not in _FORMATS:
        raise IngestError(f"unknown table format {fmt!r}; expected one of {', '.join(_FORMATS)}")


def _maybe_decompress(data: bytes, name: str, cap: int) -> bytes:
    opener: Callable[..., Any] | None = None
    kind = ""
    if data[:3] == b"BZh":
        opener, kind = bz2.open, "bz2"
    elif data[:2] == b"\x1f\x8b":
        opener, kind = gzip.open, "gzip"
    if opener is None:
        return data
    try:
        with opener(io.BytesIO(data)) as fh:
            out: bytes = fh.read(cap + 1)
    except (OSError, EOFError, ValueError) as exc:
        raise IngestError(f"{name}: looks {kind}-compressed but cannot be decompressed ({exc})") from exc
    if len(out) > cap:
        raise IngestError(f"{name}: decompresses to more than {format_bytes(cap)}, the upload limit")
    return out


def _decode(data: bytes, name: str) -> tuple[str, list[ImportIssue]]:
    text, _enc, issues = decode_bytes(data, name)
    if text is None:
        raise IngestError(f"{name}: {issues[0].message}" if issues else f"{name}: cannot be decoded")
    return text, issues


def _unique_columns(names: Sequence[Any], name: str) -> tuple[list[str], list[ImportIssue]]:
    out: list[str] = []
    issues: list[ImportIssue] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(names, start=1):
        col = str(raw).strip() if raw is not None else ""
        if not col:
            col = f"column {i}"
        if col in seen:
            seen[col] += 1
            new = f"{col} ({seen[col]})"
            issues.append(ImportIssue(name, f"duplicate column {col!r} renamed to {new!r}", "warning"))
            col = new
        else:
            seen[col] = 1
        out.append(col)
    return out, issues


def _columns_of(rows: Sequence[tuple[str, dict[str, Any] | None]]) -> list[str]:
    cols: dict[str, None] = {}
    for _, row in rows:
        if row is not None:
            for k in row:
                cols.setdefault(str(k), None)
    return list(cols)


def _json_rows(text: str, name: str) -> _Rows:
    if not text.strip():
        raise IngestError(f"{name}: the file is empty")
    try:
        value = loads(text)  # nested too deeply: a JSONDecodeError too
    except json.JSONDecodeError as exc:
        hint = " (one object per line? choose JSONL)" if exc.msg == "Extra data" else ""
        raise IngestError(
            f"{name}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{hint}"
        ) from exc
    if isinstance(value, dict):
        key = next((k for k in _WRAPPER_KEYS if isinstance(value.get(k), list)), None)
        if key is None:
            raise IngestError(
                f"{name}: expected a list of objects or an object with a 'documents' list; "
                f"found an object with keys {', '.join(repr(k) for k in list(value)[:10]) or '(none)'}"
            )
        value = value[key]
    if not isinstance(value, list):
        raise IngestError(f"{name}: expected a list of objects, found a {type(value).__name__}")
    out = _Rows(columns=[])
    for i, item in enumerate(value, start=1):
        loc = f"row {i}"
        if isinstance(item, dict):
            out.rows.append((loc, item))
        else:
            out.rows.append((loc, None))
            out.issues.append(ImportIssue(loc, f"expected an object, found {_kind(item)}", "error"))
    out.columns = _columns_of(out.rows)
    return out


def _jsonl_rows(text: str, name: str) -> _Rows:
    out = _Rows(columns=[])
    for lineno, item, exc in json_lines(text):
        loc = f"line {lineno}"
        if exc is not None:
            out.rows.append((loc, None))
            out.issues.append(ImportIssue(loc, f"invalid JSON at column {exc.colno}: {exc.msg}", "error"))
            continue
        if isinstance(item, dict):
            out.rows.append((loc, item))
        else:
            out.rows.append((loc, None))
            out.issues.append(ImportIssue(loc, f"expected an object, found {_kind(item)}", "error"))
    if not out.rows:
        raise IngestError(f"{name}: the file is empty")
    out.columns = _columns_of(out.rows)
    return out


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_UNCLOSED = 'a quoted field is never closed (a " without its closing ")'


def _counted_lines(text: str, read: list[int]) -> Iterator[str]:
    """The lines of ``text`` as :class:`csv.reader` reads them (a line break of any kind ends one); ``read[0]`` is
    kept at the number of characters handed out, where the reader's next record starts in ``text``."""
    offset = 0
    for line in io.StringIO(text, newline=""):
        offset += len(line)
        read[0] = offset
        yield line


_QUOTED = re.compile(r'"[^"]*+(?:""[^"]*+)*+"')  # a quoted value up to its closing quote ("" inside)


def _unclosed_quote(raw: str, delimiter: str) -> tuple[int, int | None] | None:
    """The quote that opens a value of the CSV record ``raw`` (its text as :class:`csv.reader` read it, quotes
    doubled inside quoted values) and is never properly closed: ``(its offset, None)`` when the value runs to
    the end of ``raw``, ``(its offset, offset of the quote taken as its closing one)`` when the value spans
    lines and that quote is followed by more text rather than a delimiter or the end of the line (a stray quote
    that swallowed the lines up to the next quote, which the lenient reader took as the closing one). None when
    every quoted value closes. Follows the reader: a quote opens a value only as its first character, and is
    plain text anywhere else in an unquoted value."""
    value_end = re.compile(f"[{re.escape(delimiter)}\r\n]")

    def end_of_value(i: int) -> int:
        m = value_end.search(raw, i)
        return m.start() if m else len(raw)

    i, n = 0, len(raw)
    while i < n:
        if raw[i] == '"':
            quoted = _QUOTED.match(raw, i)
            if quoted is None:
                return i, None
            closing = quoted.end() - 1
            after, i = closing + 1, end_of_value(closing + 1)
            if raw[after:i].strip() and _LINE_BREAK.search(raw, quoted.start(), closing):
                return quoted.start(), closing
        else:
            i = end_of_value(i)
        if i >= n or raw[i] != delimiter:
            return None  # the end of the record
        i += 1
    return None


def _check_quotes(raw: str, first_line: int, delimiter: str, name: str) -> None:
    """Raise :class:`IngestError` naming the line where a quoted field of the record ``raw`` (read from line
    ``first_line`` on) starts when it is never closed (see :func:`_unclosed_quote`)."""
    found = _unclosed_quote(raw, delimiter)
    if found is None:
        return
    opening, closing = found

    def line_of(offset: int) -> int:
        return first_line + sum(1 for _ in _LINE_BREAK.finditer(raw, 0, offset))

    what = "the rest of the file would be read as one value" if closing is None else \
        f'the text from there to the " on line {line_of(closing)} would be read as one value'
    raise IngestError(f"{name}: line {line_of(opening)}: {_UNCLOSED}: {what}")


def check_csv_quotes(text: str, delimiter: str, name: str) -> None:
    """Raise :class:`IngestError` for the first record of the CSV ``text`` with a quoted field that is never
    closed, naming its line (what :func:`_csv_rows` checks as it reads; for other CSV readers, e.g. query
    tables). A record the csv module cannot read at all is left to the caller's reader."""
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    read = [0]
    reader = csv.reader(_counted_lines(text, read), delimiter=delimiter)
    last_start, last_line = 0, 1
    while True:
        start_line, start = reader.line_num + 1, read[0]
        try:
            next(reader)
        except StopIteration:
            break
        except csv.Error:
            return
        last_start, last_line = start, start_line
        if reader.line_num > start_line:
            _check_quotes(text[start:read[0]], start_line, delimiter, name)
    _check_quotes(text[last_start:], last_line, delimiter, name)


def _csv_rows(text: str, name: str) -> _Rows:
    if not text.strip():
        raise IngestError(f"{name}: the file is empty")
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    sample = text[:65536]
    first_line = sample.split("\n", 1)[0]
    delimiter = ","
    try:
        sniffed = csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
        if sniffed in first_line:
            delimiter = sniffed
    except csv.Error:
        if "\t" in first_line and "," not in first_line:
            delimiter = "\t"
    read = [0]  # characters the reader has read
    reader = csv.reader(_counted_lines(text, read), delimiter=delimiter)
    # The reader is lenient: a quote never closed swallows every line after it into one value, and a stray one
    # the lines up to the next quote. Each record read from several lines, and the last one, are checked.
    try:
        header = next(reader)
    except csv.Error as exc:
        raise IngestError(f"{name}: cannot read the CSV header: {exc}") from exc
    except StopIteration:
        raise IngestError(f"{name}: the file is empty") from None
    last_start, last_line = 0, 1  # where the last record read starts (offset in text, line)
    if reader.line_num > 1:
        _check_quotes(text[:read[0]], 1, delimiter, name)
    columns, issues = _unique_columns(header, name)
    out = _Rows(columns=columns, issues=issues)
    n = 0
    while True:
        start_line, start = reader.line_num + 1, read[0]
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise IngestError(f"{name}: CSV error at line {start_line}: {exc}") from exc
        last_start, last_line = start, start_line
        if reader.line_num > start_line:
            _check_quotes(text[start:read[0]], start_line, delimiter, name)
        if not values or all(not v.strip() for v in values):
            continue
        n += 1
        loc = f"row {n}"
        if len(values) > len(columns):  # read by position, its values would land in the wrong columns
            out.issues.append(ImportIssue(loc, _too_many_values(len(values), len(columns), start_line), "error"))
            out.rows.append((loc, None))
            continue
        out.rows.append((loc, dict(zip(columns, map(restore, values)))))  # formulas neutralised by an export
    _check_quotes(text[last_start:], last_line, delimiter, name)
    return out


def _too_many_values(n_values: int, n_columns: int, line: int) -> str:
    """Why a CSV row with more values than its header has columns is left out: read by position, each value after
    an unquoted delimiter inside a value would land in the next column (``Too,many,columns,here,extra`` under
    ``title,text,label`` would become a document 'Too' labelled 'columns')."""
    return (f"has {n_values} values but the header has {n_columns} columns (line {line}); its values cannot be "
            "matched to the columns, so the row is left out: quote a value that holds the delimiter "
            '("a, b") or remove the extra values')


def _parquet_rows(data: bytes, name: str) -> _Rows:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
        raise IngestError("reading Parquet needs the 'pyarrow' package") from exc
    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises several types for bad files
        raise IngestError(f"{name}: not a readable Parquet file ({exc})") from exc
    out = _Rows(columns=[str(c) for c in table.column_names])
    for i, row in enumerate(table.to_pylist(), start=1):
        out.rows.append((f"row {i}", row))
    return out


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _load_rows(data: bytes, fmt: str, name: str, max_total_bytes: int) -> _Rows:
    _check_format(fmt)
    if len(data) > max_total_bytes:
        raise IngestError(
            f"{name}: the upload is {format_bytes(len(data))}, over the "
            f"{format_bytes(max_total_bytes)} limit"
        )
    data = _maybe_decompress(data, name, max_total_bytes)
    if fmt == "parquet":
        return _parquet_rows(data, name)
    text, issues = _decode(data, name)
    rows = {"json": _json_rows, "jsonl": _jsonl_rows, "csv": _csv_rows}[fmt](text, name)
    rows.issues[:0] = issues
    return rows


def sniff_columns(data: bytes, fmt: str, name: str = "upload") -> list[str]:
    """Column names of a table upload, in order of first appearance.

    Raises :class:`~mrag_core.ingest.records.IngestError` (user-facing message) when the
    upload cannot be read at all (not JSON, empty, binary, unknown format...).
    """
    rows = _load_rows(data, fmt, name, MAX_TOTAL_BYTES)
    if not rows.columns:
        raise IngestError(f"{name}: no columns found (no row is an object with fields)")
    return rows.columns


_TEXT_NAMES = ("text", "content", "body", "document", "abstract", "summary", "passage", "description")
_TITLE_NAMES = ("title", "name", "heading", "headline", "subject")
_LABEL_NAMES = ("label", "category", "class", "aspect", "topic", "tag", "section")


def suggest_mapping(columns: Sequence[str]) -> ColumnMapping | None:
    """A mapping guessed from column names (case-insensitive), or None when no text column
    is recognisable."""
    low = {c.lower().strip(): c for c in columns}

    def find(names: Sequence[str]) -> str | None:
        return next((low[n] for n in names if n in low), None)

    text = find(_TEXT_NAMES)
    if text is None:
        return None
    title = find(_TITLE_NAMES)
    label = find(_LABEL_NAMES)
    return ColumnMapping(text=text, title=title if title != text else None,
                         label=label if label not in (text, title) else None)


def _cell(value: Any, what: str, loc: str) -> tuple[str | None, ImportIssue | None]:
    """A cell as a string (or None when empty), with an issue if it had to be coerced."""
    if value is None:
        return None, None
    if isinstance(value, str):
        return value, None
    if isinstance(value, bool):
        return str(value).lower(), ImportIssue(loc, f"{what} is a boolean; converted to text", "warning")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return None, None
        s = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
        return s, (ImportIssue(loc, f"{what} is a number; converted to text", "warning")
                   if what == "text" else None)
    if what == "text":
        return None, ImportIssue(loc, f"text is {_kind(value)}, expected a string", "error")
    return None, ImportIssue(loc, f"{what} is {_kind(value)}, expected a string; ignored", "warning")


def fallback_title(text: str, limit: int = 60) -> str:
    """A title from the start of ``text``: its first line, cut at a word within ``limit``."""
    first = text.strip().split("\n", 1)[0].strip().lstrip("#").strip()
    if len(first) <= limit:
        return first
    cut = first[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) >= limit // 2 else first[:limit]).rstrip(" ,.;:") + "…"


#: The column an export of this app writes beside ``label`` (``human`` / ``suggestion`` / empty); read back on import.
LABEL_SOURCE_COLUMN = "label_source"


def read_table(
    data: bytes,
    fmt: str,
    mapping: ColumnMapping,
    source_name: str,
    *,
    max_doc_bytes: int | None = MAX_DOC_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> ImportPreview:
    """Read every row of a table upload into a preview; never raises for bad content.

    File-level problems (unreadable file, a CSV quote never closed, mapped column absent: the
    message lists the available columns) give one error located at ``source_name`` and no
    records. Row-level problems (empty or non-string text, malformed JSONL line, document over
    ``max_doc_bytes``) give an error for that row, which is skipped. Missing titles fall back
    to the start of the text (a warning when a title column was mapped); empty labels become
    ``None``. Records' ``source`` is ``"<source_name> <location>"``; every issue names ``source_name`` as its
    ``source`` (so ``str(issue)`` reads ``"ERROR data.csv row 2: ..."``: several tables can be told apart).
    """
    preview = _read_rows(data, fmt, mapping, source_name, max_doc_bytes, max_total_bytes)
    preview.issues = in_source(preview.issues, source_name)
    return preview


def _read_rows(data: bytes, fmt: str, mapping: ColumnMapping, source_name: str, max_doc_bytes: int | None,
               max_total_bytes: int) -> ImportPreview:
    """:func:`read_table` with issues located in the file only (by row / line, or at ``source_name``)."""
    try:
        rows = _load_rows(data, fmt, source_name, max_total_bytes)
    except IngestError as exc:
        return ImportPreview(issues=[ImportIssue(source_name, _strip_name(str(exc), source_name), "error")])
    preview = ImportPreview(issues=list(rows.issues), n_rows_read=len(rows.rows))
    missing = [c for c in (mapping.text, mapping.title, mapping.label) if c is not None and c not in rows.columns]
    if missing:
        available = ", ".join(repr(c) for c in rows.columns) or "(none)"
        which = ", ".join(repr(c) for c in missing)
        preview.issues.append(ImportIssue(
            source_name,
            f"column{'s' if len(missing) > 1 else ''} {which} not found; available columns: {available}",
            "error",
        ))
        preview.n_skipped = len(rows.rows)
        return preview
    for loc, row in rows.rows:
        if row is None:  # already reported
            preview.n_skipped += 1
            continue
        record, issues = _row_record(row, loc, mapping, source_name, max_doc_bytes)
        preview.issues.extend(issues)
        if record is None:
            preview.n_skipped += 1
        else:
            preview.records.append(record)
    return preview


def _strip_name(message: str, name: str) -> str:
    prefix = f"{name}: "
    return message[len(prefix):] if message.startswith(prefix) else message


def _row_record(
    row: dict[str, Any], loc: str, mapping: ColumnMapping, source_name: str, max_doc_bytes: int | None
) -> tuple[ImportRecord | None, list[ImportIssue]]:
    issues: list[ImportIssue] = []
    text, issue = _cell(row.get(mapping.text), "text", loc)
    if issue is not None:
        issues.append(issue)
        if issue.severity == "error":
            return None, issues
    text = normalise_text(text or "")
    if not text:
        issues.append(ImportIssue(loc, f"empty text (column {mapping.text!r})", "error"))
        return None, issues
    problem = text_problem(text, max_doc_bytes)
    if problem is not None:
        issues.append(ImportIssue(loc, problem, "error"))
        return None, issues
    title: str | None = None
    if mapping.title is not None:
        title, issue = _cell(row.get(mapping.title), "title", loc)
        if issue is not None:
            issues.append(issue)
        title = " ".join(title.split()) if title else None
        if not title:
            issues.append(ImportIssue(loc, "empty title; used the start of the text", "warning"))
    label: str | None = None
    if mapping.label is not None:
        label, issue = _cell(row.get(mapping.label), "label", loc)
        if issue is not None:
            issues.append(issue)
        label = (label.strip() or None) if label is not None else None
    # An export of this app says which labels are machine suggestions nobody decided on: they stay suggestions.
    suggested = label is not None and str(row.get(LABEL_SOURCE_COLUMN) or "").strip().lower() == "suggestion"
    return ImportRecord(
        title=title or fallback_title(text),
        text=text,
        label=label,
        source=f"{source_name} {loc}",
        label_is_suggestion=suggested,
    ), issues
