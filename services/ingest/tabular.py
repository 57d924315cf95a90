"""Importing documents from tables: JSON, JSONL, CSV (and Parquet).

Two steps, matching the UI: :func:`sniff_columns` lists the columns of an upload so the user
can map them (:func:`suggest_mapping` proposes a mapping), then :func:`read_table` turns every
row into an :class:`~services.ingest.records.ImportRecord` or a located
:class:`~services.ingest.records.ImportIssue`. :func:`iter_table` gives the same rows one at a time: CSV, JSONL
and Parquet are read as streams (from bytes or a path on disk, :mod:`services.ingest.streams`), so a table of any
size is read in memory for a row; JSON is parsed whole.

Accepted shapes: JSON is a list of objects or ``{"documents": [...]}`` (also ``"records"``,
``"data"``, ``"articles"``, ``"items"``); JSONL is one object per line; CSV has a header row and
its delimiter (``,`` ``;`` tab ``|``) is sniffed; a quoted field that is never closed refuses the
file, naming the line where it starts (read leniently, it would take in the rest of the file as
one value); a row with more values than the header has columns is an error (its values cannot be matched to
the columns); a CSV cell that an export neutralised as a spreadsheet formula (``'=...``) loses that quote
(:func:`services.csv_cells.restore`). bz2/gzip-compressed uploads are decompressed transparently (the authors'
``wikipedia_articles_v1.json.bz2`` reads as JSON). Locations are ``"row N"`` (JSON, CSV,
Parquet; 1-based data rows) or ``"line N"`` (JSONL), in the file the issue's ``source`` names.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import IO, Any, Literal

from mrag_core.jsonlines import array_items, json_lines, json_shape
from mrag_core.textio import check_record_quotes
from services.csv_cells import restore
from services.ingest.records import (
    MAX_DOC_BYTES,
    MAX_TOTAL_BYTES,
    ImportIssue,
    ImportPreview,
    ImportRecord,
    IngestError,
    in_source,
    normalise_text,
    text_problem,
)
from services.ingest.streams import TableData, TextSource, open_binary

__all__ = [
    "ColumnMapping",
    "TableFormat",
    "TableRow",
    "fallback_title",
    "guess_format",
    "iter_table",
    "read_table",
    "sniff_columns",
    "suggest_mapping",
    "text_source",
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


#: A row as a reader gives it: its location, the row (None when it is left out) and the issue that left it out.
_Row = tuple[str, "dict[str, Any] | None", "ImportIssue | None"]


@dataclass
class _Table:
    """A table opened: its columns, issues about the file, and its rows (an iterator: read once, lazily)."""

    columns: list[str]
    issues: list[ImportIssue]
    rows: Iterator[_Row]


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


class _Fields:
    """Gathers the fields of an array's object items, in order of first appearance (a table's columns)."""

    def __init__(self) -> None:
        self.columns: dict[str, None] = {}

    def __call__(self, item: Any) -> None:
        if isinstance(item, dict):
            for k in item:
                self.columns.setdefault(str(k), None)


def _json_table(src: TextSource, name: str) -> _Table:
    """A JSON table: a list of objects, or an object holding one under a :data:`_WRAPPER_KEYS` key. The document is
    checked whole first (an invalid one is refused before any row, naming its line and column) and its columns
    gathered; its rows are then read again, one at a time. Both readings hold a buffer and one item, never the
    whole file (``mrag_core.jsonlines``)."""
    with src.open() as stream:
        if all(not part.strip() for part in iter(lambda: stream.read(65536), "")):  # stops at the first text
            raise IngestError(f"{name}: the file is empty")
    try:
        shape = json_shape(src.open, _WRAPPER_KEYS, _Fields)  # nested too deeply: a JSONDecodeError too
    except json.JSONDecodeError as exc:
        hint = " (one object per line? choose JSONL)" if exc.msg == "Extra data" else ""
        raise IngestError(
            f"{name}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{hint}"
        ) from exc
    if shape.kind == "object":
        key = next((k for k in _WRAPPER_KEYS if k in shape.lists), None)
        if key is None:
            raise IngestError(
                f"{name}: expected a list of objects or an object with a 'documents' list; "
                f"found an object with keys {', '.join(repr(k) for k in shape.keys[:10]) or '(none)'}"
            )
        start, fields = shape.lists[key]
    elif shape.kind == "list":
        start, fields = shape.lists[None]
    else:
        raise IngestError(f"{name}: expected a list of objects, found a {shape.kind}")
    return _Table(list(fields.columns), [], _json_rows(src, start))


def _json_rows(src: TextSource, start: int) -> Iterator[_Row]:
    for i, item in enumerate(array_items(src.open, start), start=1):
        loc = f"row {i}"
        if isinstance(item, dict):
            yield loc, item, None
        else:
            yield loc, None, ImportIssue(loc, f"expected an object, found {_kind(item)}", "error")


def _jsonl_table(src: TextSource, name: str) -> _Table:
    """A JSONL table read as a stream: a first pass collects the columns (every key of every object line), the
    rows come from a second one."""
    columns: dict[str, None] = {}
    any_line = False
    with src.open(newline=None) as fh:
        for line in fh:
            if not line.strip():
                continue
            any_line = True
            for _, item, exc in json_lines(line):
                if exc is None and isinstance(item, dict):
                    for key in item:
                        columns.setdefault(str(key), None)
    if not any_line:
        raise IngestError(f"{name}: the file is empty")
    return _Table(list(columns), [], _jsonl_rows(src))


def _jsonl_rows(src: TextSource) -> Iterator[_Row]:
    with src.open(newline=None) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            loc = f"line {lineno}"
            for _, item, exc in json_lines(line):
                if exc is not None:
                    yield loc, None, ImportIssue(loc, f"invalid JSON at column {exc.colno}: {exc.msg}", "error")
                elif isinstance(item, dict):
                    yield loc, item, None
                else:
                    yield loc, None, ImportIssue(loc, f"expected an object, found {_kind(item)}", "error")


class _LineFeed:
    """The lines of a text stream as :class:`csv.reader` reads them, keeping those of the record being read
    (:attr:`lines`, emptied by the caller before each record): its raw text, for the quote check."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.lines: list[str] = []

    def __iter__(self) -> _LineFeed:
        return self

    def __next__(self) -> str:
        line = self._stream.readline()
        if not line:
            raise StopIteration
        self.lines.append(line)
        return line


def _csv_table(src: TextSource, name: str) -> _Table:
    """A CSV table read as a stream: its delimiter sniffed from the first 64 KB, its header read now, its rows as they
    are asked for (each record read from several lines, and the last one, checked for a quote never closed)."""
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    with src.open() as fh:
        sample = fh.read(65536)
        if not sample.strip() and not fh.read(1):
            raise IngestError(f"{name}: the file is empty")
    first_line = sample.split("\n", 1)[0]
    delimiter = ","
    try:
        sniffed = csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
        if sniffed in first_line:
            delimiter = sniffed
    except csv.Error:
        if "\t" in first_line and "," not in first_line:
            delimiter = "\t"
    stream = src.open()
    try:
        feed = _LineFeed(stream)
        reader = csv.reader(feed, delimiter=delimiter)
        # The reader is lenient: a quote never closed swallows every line after it into one value, and a stray one
        # the lines up to the next quote. Each record read from several lines, and the last one, are checked.
        try:
            header = next(reader)
        except csv.Error as exc:
            raise IngestError(f"{name}: cannot read the CSV header: {exc}") from exc
        except StopIteration:
            raise IngestError(f"{name}: the file is empty") from None
        if reader.line_num > 1:
            check_record_quotes("".join(feed.lines), 1, delimiter, name)
    except BaseException:
        stream.close()
        raise
    columns, issues = _unique_columns(header, name)
    return _Table(columns, issues, _csv_rows(stream, feed, reader, columns, delimiter, name))


def _csv_rows(stream: IO[str], feed: _LineFeed, reader: Any, columns: list[str], delimiter: str, name: str
              ) -> Iterator[_Row]:
    """The rows after the header (blank ones skipped; ``row N`` counts the others)."""
    with stream:
        last_raw, last_line = "".join(feed.lines), 1  # the last record read: its text and first line
        n = 0
        while True:
            feed.lines = []
            start_line = reader.line_num + 1
            try:
                values = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                raise IngestError(f"{name}: CSV error at line {start_line}: {exc}") from exc
            last_raw, last_line = "".join(feed.lines), start_line
            if reader.line_num > start_line:
                check_record_quotes(last_raw, start_line, delimiter, name)
            if not values or all(not v.strip() for v in values):
                continue
            n += 1
            loc = f"row {n}"
            if len(values) > len(columns):  # read by position, its values would land in the wrong columns
                yield loc, None, ImportIssue(loc, _too_many_values(len(values), len(columns), start_line), "error")
                continue
            yield loc, dict(zip(columns, map(restore, values))), None  # formulas neutralised by an export
        check_record_quotes(last_raw + "".join(feed.lines), last_line, delimiter, name)


def _too_many_values(n_values: int, n_columns: int, line: int) -> str:
    """Why a CSV row with more values than its header has columns is left out: read by position, each value after
    an unquoted delimiter inside a value would land in the next column (``Too,many,columns,here,extra`` under
    ``title,text,label`` would become a document 'Too' labelled 'columns')."""
    return (f"has {n_values} values but the header has {n_columns} columns (line {line}); its values cannot be "
            "matched to the columns, so the row is left out: quote a value that holds the delimiter "
            '("a, b") or remove the extra values')


def _parquet_table(data: TableData, name: str, max_total_bytes: int) -> _Table:
    """A Parquet table: its columns from the schema, its rows read a batch at a time."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
        raise IngestError("reading Parquet needs the 'pyarrow' package") from exc
    try:
        with open_binary(data, name, max_total_bytes) as raw:  # decompressed, when it is
            source: Any = data if isinstance(data, Path) and raw.seekable() else io.BytesIO(raw.read())
        parquet = pq.ParquetFile(source)
        columns = [str(c) for c in parquet.schema_arrow.names]
    except IngestError:
        raise
    except Exception as exc:  # pyarrow raises several types for bad files
        raise IngestError(f"{name}: not a readable Parquet file ({exc})") from exc
    return _Table(columns, [], _parquet_rows(parquet, name))


def _parquet_rows(parquet: Any, name: str) -> Iterator[_Row]:
    i = 0
    try:
        for batch in parquet.iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                i += 1
                yield f"row {i}", row, None
    except Exception as exc:  # a corrupt page further in
        raise IngestError(f"{name}: not a readable Parquet file ({exc})") from exc


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _open_table(data: TableData | TextSource, fmt: str, name: str, max_total_bytes: int) -> _Table:
    """The table ``data`` opened: its columns and file issues read now, its rows as they are asked for (CSV,
    JSONL, JSON and Parquet are read as streams). Raises
    IngestError (naming ``name``) when it cannot be read; its rows may raise it too, for a problem found further in
    (a CSV quote never closed, corrupt data)."""
    _check_format(fmt)
    if fmt == "parquet":
        if isinstance(data, TextSource):
            raise IngestError(f"{name}: a Parquet file is not text")
        return _parquet_table(data, name, max_total_bytes)
    src = data if isinstance(data, TextSource) else TextSource(data, name, max_total_bytes)
    if fmt == "json":  # checked whole, then its rows read one at a time
        table = _json_table(src, name)
    else:
        table = (_csv_table if fmt == "csv" else _jsonl_table)(src, name)
    table.issues[:0] = src.issues
    return table


def text_source(data: TableData, name: str, max_total_bytes: int = MAX_TOTAL_BYTES) -> TextSource:
    """``data`` opened as text once (its encoding found), for reading the same table several times (its columns,
    its preview, its import) without checking its encoding each time. Raises IngestError."""
    return TextSource(data, name, max_total_bytes)


def sniff_columns(data: TableData | TextSource, fmt: str, name: str = "upload") -> list[str]:
    """Column names of a table upload, in order of first appearance.

    Raises :class:`~services.ingest.records.IngestError` (user-facing message) when the
    upload cannot be read at all (not JSON, empty, binary, unknown format, a CSV quote never closed...). A CSV is
    read to its end for that (as a stream: nothing is kept).
    """
    table = _open_table(data, fmt, name, MAX_TOTAL_BYTES)
    if fmt == "csv":
        for _ in table.rows:
            pass
    if not table.columns:
        raise IngestError(f"{name}: no columns found (no row is an object with fields)")
    return table.columns


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
    data: TableData | TextSource,
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
    The preview holds every record: :func:`iter_table` reads the same rows one at a time.
    """
    preview = ImportPreview()
    later: list[ImportIssue] = []  # the issues of the rows' values, after those the reader met (as they always were)
    try:
        for row in iter_table(data, fmt, mapping, source_name, max_doc_bytes=max_doc_bytes,
                              max_total_bytes=max_total_bytes):
            (preview.issues if row.by_reader else later).extend(row.issues)
            if row.counted:
                preview.n_rows_read += 1
                if row.record is None:
                    preview.n_skipped += 1
                else:
                    preview.records.append(row.record)
        preview.issues.extend(later)
    except IngestError as exc:
        return ImportPreview(issues=in_source([ImportIssue(source_name, _strip_name(str(exc), source_name))],
                                              source_name))
    return preview


@dataclass(frozen=True)
class TableRow:
    """One step of :func:`iter_table`: a row read (``counted``), with its record or None (left out), and the issues
    met on the way (each naming the file); or, not ``counted``, issues about the file itself."""

    record: ImportRecord | None
    issues: list[ImportIssue]
    counted: bool = True
    by_reader: bool = False  # the issues are the file's, or the reader's about a row it could not read


def iter_table(
    data: TableData | TextSource,
    fmt: str,
    mapping: ColumnMapping,
    source_name: str,
    *,
    max_doc_bytes: int | None = MAX_DOC_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> Iterator[TableRow]:
    """The rows of a table upload one at a time, read lazily: a CSV, JSONL or Parquet file is never held whole
    (``data`` may be a path on disk), so reading any number of rows takes memory for one row at a time. Each row is
    what :func:`read_table` makes of it. Raises :class:`~services.ingest.records.IngestError` (naming the file) for
    a problem with the whole file, possibly after rows were yielded (a CSV quote never closed further in): the
    caller then drops what it took from this file, as :func:`read_table` does. A mapped column that is absent is
    one error about the file, and every row is counted as read and left out."""
    table = _open_table(data, fmt, source_name, max_total_bytes)
    if table.issues:
        yield TableRow(None, in_source(table.issues, source_name), counted=False, by_reader=True)
    missing = [c for c in (mapping.text, mapping.title, mapping.label) if c is not None and c not in table.columns]
    if missing:
        available = ", ".join(repr(c) for c in table.columns) or "(none)"
        which = ", ".join(repr(c) for c in missing)
        yield TableRow(None, [ImportIssue.of_file(
            source_name, f"column{'s' if len(missing) > 1 else ''} {which} not found; available columns: {available}")],
            counted=False, by_reader=True)
        for _ in table.rows:
            yield TableRow(None, [])
        return
    for loc, row, issue in table.rows:
        if row is None:  # reported by the reader
            yield TableRow(None, in_source([issue], source_name) if issue is not None else [], by_reader=True)
            continue
        record, issues = _row_record(row, loc, mapping, source_name, max_doc_bytes)
        yield TableRow(record, in_source(issues, source_name))


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
