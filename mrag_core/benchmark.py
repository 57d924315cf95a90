"""Loaders for the MRAG authors' benchmark formats.

Two layouts are supported:

* **Wikipedia** (``wikipedia_articles_v1.json.bz2`` / ``wikipedia_queries_v1.json.bz2``):
  articles are a JSON list of ``{"title", "text", "label"}``; queries are a JSON list of
  ``{"topics": [article titles], "text": story, "fusion": [sub-queries]}``. Ground truth is
  at article level: a query's topics are article titles (:func:`resolve_ground_truth`). Query
  files written by MRAG Studio add, per topic, the document's category (``categories``) and id
  (``document_ids``), and the query's ``status`` and ``reason`` (a flagged query stays flagged);
  other readers can ignore them.
* **Topic layout** (the legal and chemical-accident data sets): documents live in
  ``<category>/<category>_<topic>.json`` files, each holding the documents of one topic;
  queries carry the names of their ``related`` topics and are scored at topic level: the
  ground truth of a query is the set of documents of its topics (read by
  :mod:`mrag_core.topic_layout`, with the file readers and query parsing of this module).

Files may be plain ``.json``, ``.jsonl`` (one object per line) or bz2/gzip compressed
(detected from the content, not only from the name). Every problem a user can cause (missing
file, bad compression, bad JSON, wrong shape) raises :class:`BenchmarkFormatError` whose
message names the file and what is wrong.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrag_core.jsonlines import JSONTooDeep, json_lines, loads
from mrag_core.names import fold_name, fold_topic

__all__ = [
    "Article",
    "BenchQuery",
    "BenchmarkFormatError",
    "BenchmarkFileNotFoundError",
    "Resolution",
    "clean_fusion",
    "decode_benchmark_bytes",
    "load_articles",
    "load_queries",
    "parse_articles",
    "parse_queries",
    "read_query_rows",
    "resolve_ground_truth",
]

#: Largest decompressed benchmark file we accept (guards against compression bombs).
MAX_DECOMPRESSED_BYTES = 512 * 1024 * 1024


class BenchmarkFormatError(ValueError):
    """A benchmark file is missing, unreadable or has the wrong shape.

    The message always names the file (or archive member) and what is wrong, so the UI and
    CLI can print it as is.
    """


class BenchmarkFileNotFoundError(BenchmarkFormatError):
    """The benchmark file or folder does not exist."""


@dataclass(frozen=True)
class Article:
    """One benchmark document. ``label`` is its category."""

    title: str
    text: str
    label: str

    @property
    def key(self) -> tuple[str, str]:
        """``(title, label)``: titles may repeat across categories, this pair identifies."""
        return (self.title, self.label)


QUERY_FILE_STATUSES = ("ok", "flagged")
"""The ``status`` values a query file may give (failed queries, without a text, are never written)."""


@dataclass(frozen=True)
class BenchQuery:
    """One benchmark query: its text, the topics it asks about and its fusion sub-queries.

    ``fusion`` is already cleaned (see :func:`clean_fusion`). Query files written by MRAG Studio also
    give, per topic, the category of the document meant (``categories``, ``None`` for an unlabelled
    one) and its id in the database it came from (``document_ids``), which together tell documents of
    one title apart; and whether the query was ``flagged`` for review, with the ``reason``. Empty
    tuples / strings when the file does not say.
    """

    text: str
    topics: tuple[str, ...]
    fusion: tuple[str, ...] = ()
    categories: tuple[str | None, ...] = ()
    document_ids: tuple[int | None, ...] = ()
    status: str = ""
    reason: str = ""

    @property
    def n_aspects(self) -> int:
        """Number of aspects (topics) the query covers."""
        return len(self.topics)


@dataclass
class Resolution:
    """Ground truth of queries as article indices.

    ``doc_indices[q]`` lists the indices (into the article list) of query ``q``'s topics in
    topic order, leaving out unresolved ones; ``unresolved`` lists ``(query_index, topic)``
    for every topic left without an article: one that matched none, or one that matched several
    and nothing told them apart; the latter are also in ``ambiguous`` as
    ``(query_index, topic, number of articles with that title)``.
    """

    doc_indices: list[list[int]]
    unresolved: list[tuple[int, str]] = field(default_factory=list)
    ambiguous: list[tuple[int, str, int]] = field(default_factory=list)

    @property
    def all_resolved(self) -> bool:
        """True when every topic of every query got exactly one article."""
        return not self.unresolved


# --------------------------------------------------------------------------- reading bytes

_NUMBERING = re.compile(r"^\s*(?:\(?\d{1,3}[.):]|[-*\u2022+])(?:\s+|$)")


def clean_fusion(items: Iterable[Any] | None) -> tuple[str, ...]:
    """Clean fusion sub-queries: strip whitespace and list markers, drop blanks.

    List markers removed at the start of an item: ``1.``, ``2)``, ``(3)``, ``4:``, ``-``,
    ``*``, ``+``, ``•`` (each followed by whitespace or the end). ``None`` gives ``()``;
    non-string items are converted with ``str``.
    """
    if items is None:
        return ()
    if isinstance(items, str):
        items = [items]
    out: list[str] = []
    for item in items:
        if item is None:
            continue
        s = str(item).strip()
        s = _NUMBERING.sub("", s, count=1).strip()
        if s:
            out.append(s)
    return tuple(out)


def _decompress_capped(opener: Any, data: bytes, name: str, kind: str) -> bytes:
    try:
        with opener(io.BytesIO(data)) as fh:
            out = fh.read(MAX_DECOMPRESSED_BYTES + 1)
    except (OSError, EOFError, ValueError) as exc:
        raise BenchmarkFormatError(f"{name}: not a valid {kind} file ({exc})") from exc
    if len(out) > MAX_DECOMPRESSED_BYTES:
        raise BenchmarkFormatError(
            f"{name}: decompresses to more than {MAX_DECOMPRESSED_BYTES // 2**20} MB; refusing"
        )
    return out


def _decompressed(data: bytes, name: str) -> bytes:
    """The bytes of a (possibly bz2/gzip-compressed, detected from magic bytes) file."""
    if data[:3] == b"BZh":
        return _decompress_capped(bz2.open, data, name, "bz2")
    if data[:2] == b"\x1f\x8b":
        return _decompress_capped(gzip.open, data, name, "gzip")
    if name.lower().endswith((".bz2", ".gz")):
        raise BenchmarkFormatError(f"{name}: the name says compressed but the content is not")
    return data


def _decompressed_text(data: bytes, name: str, notes: list[str] | None = None) -> str:
    """The text of a (possibly bz2/gzip-compressed) file: UTF-8 (a byte-order mark dropped). With ``notes`` (a
    list), text in another encoding is read as a document import reads it
    (:func:`mrag_core.textio.decode_bytes`: UTF-16 by its byte-order mark or layout, else Windows-1252,
    else Latin-1) and how it was read is appended to ``notes``; without, or for binary content, anything but UTF-8
    raises :class:`BenchmarkFormatError`."""
    data = _decompressed(data, name)
    if notes is not None:
        from mrag_core.textio import decode_bytes

        text, _codec, issues = decode_bytes(data, name)
        if text is None:
            raise BenchmarkFormatError(f"{name}: " + (issues[0].message if issues else "cannot be decoded as text"))
        notes.extend(issue.message for issue in issues)
        return text
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BenchmarkFormatError(
            f"{name}: not UTF-8 text (byte {exc.start}); benchmark files must be UTF-8 JSON"
        ) from exc


def _base_name(name: str) -> str:
    return name.lower().removesuffix(".bz2").removesuffix(".gz")


def decode_benchmark_bytes(data: bytes, name: str) -> Any:
    """Decode the bytes of a benchmark file into JSON values.

    Compression (bz2, gzip) is detected from magic bytes. ``.jsonl`` names (or content that
    is not one JSON document but is one JSON value per line) give a list of the line values.
    Raises :class:`BenchmarkFormatError` naming ``name`` on any decoding problem.
    """
    text = _decompressed_text(data, name)
    base = _base_name(name)
    if base.endswith(".jsonl") or base.endswith(".ndjson"):
        return _parse_jsonl(text, name)
    if not text.strip():
        raise BenchmarkFormatError(f"{name}: the file is empty")
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            try:
                return _parse_jsonl(text, name)
            except BenchmarkFormatError:
                pass
        raise BenchmarkFormatError(
            f"{name}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc


def _parse_jsonl(text: str, name: str) -> list[Any]:
    out: list[Any] = []
    for lineno, item, exc in json_lines(text):
        if exc is not None:
            raise BenchmarkFormatError(f"{name}: line {lineno} is not valid JSON: {exc.msg}") from exc
        out.append(item)
    if not out:
        raise BenchmarkFormatError(f"{name}: the file is empty")
    return out


def _read_path(path: str | Path) -> tuple[bytes, str]:
    p = Path(path)
    if not p.exists():
        raise BenchmarkFileNotFoundError(f"{p}: file not found")
    if p.is_dir():
        raise BenchmarkFormatError(f"{p}: is a folder, expected a JSON file")
    try:
        return p.read_bytes(), str(p)
    except OSError as exc:
        raise BenchmarkFormatError(f"{p}: cannot be read ({exc.strerror or exc})") from exc


# --------------------------------------------------------------------------- validation


def _as_list(value: Any, name: str, wrapper_keys: Sequence[str]) -> list[Any]:
    if isinstance(value, dict):
        for key in wrapper_keys:
            if isinstance(value.get(key), list):
                return value[key]
        raise BenchmarkFormatError(
            f"{name}: expected a JSON list (or an object with "
            f"{' / '.join(repr(k) for k in wrapper_keys)}), got an object with keys "
            f"{', '.join(repr(k) for k in list(value)[:8]) or '(none)'}"
        )
    if not isinstance(value, list):
        raise BenchmarkFormatError(f"{name}: expected a JSON list, got {_type_name(value)}")
    if not value:
        raise BenchmarkFormatError(f"{name}: the list is empty")
    return value


def _type_name(value: Any) -> str:
    return {
        dict: "an object", list: "a list", str: "a string", int: "a number",
        float: "a number", bool: "a boolean", type(None): "null",
    }.get(type(value), type(value).__name__)


def _req_str(item: Mapping[str, Any], key: str, where: str, *, allow_empty: bool = False) -> str:
    if key not in item:
        raise BenchmarkFormatError(f"{where} has no {key!r}")
    value = item[key]
    if not isinstance(value, str):
        raise BenchmarkFormatError(f"{where}: {key!r} must be a string, got {_type_name(value)}")
    if not allow_empty and not value.strip():
        raise BenchmarkFormatError(f"{where} has an empty {key!r}")
    return value


def parse_articles(value: Any, name: str) -> list[Article]:
    """Validate decoded JSON as a list of ``{"title", "text", "label"}`` articles.

    Also accepts ``{"documents": [...]}`` / ``{"articles": [...]}``. Raises
    :class:`BenchmarkFormatError` such as ``"x.json: item 12 has no 'text'"`` (1-based items).
    """
    items = _as_list(value, name, ("articles", "documents"))
    out: list[Article] = []
    for i, item in enumerate(items, start=1):
        where = f"{name}: item {i}"
        if not isinstance(item, dict):
            raise BenchmarkFormatError(f"{where} must be an object, got {_type_name(item)}")
        out.append(
            Article(
                title=_req_str(item, "title", where).strip(),
                text=_req_str(item, "text", where),
                label=_req_str(item, "label", where).strip(),
            )
        )
    return out


def _query_from_item(item: Any, where: str) -> BenchQuery:
    if not isinstance(item, dict):
        raise BenchmarkFormatError(f"{where} must be an object, got {_type_name(item)}")
    text_key = next((k for k in ("text", "query", "question") if k in item), "text")
    text = _req_str(item, text_key, where)
    topic_key = next((k for k in ("topics", "related", "related_topics") if k in item), None)
    if topic_key is None:
        raise BenchmarkFormatError(f"{where} has no 'topics' (or 'related')")
    topics = item[topic_key]
    if isinstance(topics, str):
        topics = [topics]
    if not isinstance(topics, list):
        raise BenchmarkFormatError(f"{where}: {topic_key!r} must be a list, got {_type_name(topics)}")
    clean: list[str] = []
    for j, t in enumerate(topics, start=1):
        if not isinstance(t, str) or not t.strip():
            raise BenchmarkFormatError(f"{where}: {topic_key!r} entry {j} must be a non-empty string")
        clean.append(t.strip())
    if not clean:
        raise BenchmarkFormatError(f"{where} has an empty {topic_key!r} list")
    fusion = item.get("fusion")
    if fusion is not None and not isinstance(fusion, (list, str)):
        raise BenchmarkFormatError(f"{where}: 'fusion' must be a list, got {_type_name(fusion)}")
    categories = _per_topic(item, "categories", len(clean), where, str)
    ids = _per_topic(item, "document_ids", len(clean), where, int)
    status = item.get("status") or ""
    if status and status not in QUERY_FILE_STATUSES:
        raise BenchmarkFormatError(f"{where}: 'status' must be one of {', '.join(QUERY_FILE_STATUSES)}, "
                                   f"got {status!r}")
    reason = item.get("reason") or ""
    if not isinstance(reason, str):
        raise BenchmarkFormatError(f"{where}: 'reason' must be a string, got {_type_name(reason)}")
    return BenchQuery(text=text.strip(), topics=tuple(clean), fusion=clean_fusion(fusion),
                      categories=tuple((c.strip() or None) if c is not None else None for c in categories),
                      document_ids=tuple(ids), status=status, reason=reason.strip())


def _per_topic(item: Mapping[str, Any], key: str, n_topics: int, where: str, kind: type) -> list[Any]:
    """The optional list ``item[key]`` with one entry per topic, each a ``kind`` or null; ``[]`` when absent."""
    values = item.get(key)
    if values is None:
        return []
    if not isinstance(values, list) or len(values) != n_topics:
        got = f"a list of {len(values)}" if isinstance(values, list) else _type_name(values)
        raise BenchmarkFormatError(f"{where}: {key!r} must be a list with one entry per topic ({n_topics}), got {got}")
    for j, v in enumerate(values, start=1):
        if v is not None and (not isinstance(v, kind) or isinstance(v, bool)):
            raise BenchmarkFormatError(f"{where}: {key!r} entry {j} must be {_KIND_NAMES[kind]} or null, "
                                       f"got {_type_name(v)}")
    return list(values)


_KIND_NAMES = {str: "a string", int: "a whole number"}


def parse_queries(value: Any, name: str) -> list[BenchQuery]:
    """Validate decoded JSON as a list of queries (``topics`` or ``related``, ``text``, ``fusion``).

    Also accepts ``{"queries": [...]}`` and objects keyed by aspect count
    (``{"1": [...], "2": [...]}``), flattened in key order.
    """
    if isinstance(value, dict) and value and all(_is_int_key(k) for k in value):
        out: list[BenchQuery] = []
        for key in sorted(value, key=lambda k: int(k)):
            items = value[key]
            if not isinstance(items, list):
                raise BenchmarkFormatError(
                    f"{name}: entry {key!r} must be a list of queries, got {_type_name(items)}"
                )
            out.extend(_query_from_item(it, f"{name}: [{key}] item {i}") for i, it in enumerate(items, 1))
        if not out:
            raise BenchmarkFormatError(f"{name}: contains no queries")
        return out
    items = _as_list(value, name, ("queries",))
    return [_query_from_item(it, f"{name}: item {i}") for i, it in enumerate(items, start=1)]


QueryRow = tuple[str, BenchQuery]
RowProblem = tuple[str, str]


def _unwhere(message: str, where: str) -> str:
    return message[len(where):].lstrip(": ").strip() if message.startswith(where) else message


def _item_rows(items: Iterable[tuple[str, Any]]) -> tuple[list[QueryRow], list[RowProblem]]:
    rows: list[QueryRow] = []
    problems: list[RowProblem] = []
    for where, item in items:
        if isinstance(item, _Unreadable):
            problems.append((where, item.problem))
            continue
        try:
            query = _query_from_item(item, where)
            _check_storable(query, where)
        except BenchmarkFormatError as exc:
            problems.append((where, _unwhere(str(exc), where)))
        else:
            rows.append((where, query))
    return rows, problems


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _check_storable(query: BenchQuery, where: str) -> None:
    """Raise :class:`BenchmarkFormatError` when a text of ``query`` cannot be stored: it holds a NUL character (which
    PostgreSQL refuses in text) or a lone surrogate (a JSON escape such as ``"\\ud800"`` without its pair: not a
    character, and not UTF-8)."""
    fields = [("text", query.text), *(("topic", t) for t in query.topics), *(("fusion query", f) for f in query.fusion),
              *(("category", c) for c in query.categories if c), ("reason", query.reason)]
    for what, value in fields:
        m = _UNSTORABLE.search(value)
        if m is not None:
            why = ("a NUL character (\\x00), which a database cannot store" if m.group() == "\x00" else
                   f"a lone surrogate (U+{ord(m.group()):04X}), which is not a character: the file is damaged there")
            raise BenchmarkFormatError(f"{where}: the {what} {value[:40]!r} holds {why}")


@dataclass(frozen=True)
class _Unreadable:
    """A row of a query table whose cells cannot be read at all: ``problem`` says which and why."""

    problem: str


def _json_list_cell(cell: str, column: str) -> Any:
    """The JSON value of a CSV cell starting with ``[``, or None when it is not JSON (then it is a list separated by
    ``|``); raises :class:`BenchmarkFormatError` naming ``column`` when it is nested too deeply to be read."""
    try:
        return loads(cell)
    except JSONTooDeep as exc:
        raise BenchmarkFormatError(f"column {column!r}: {exc.msg} (character {exc.colno})") from None
    except json.JSONDecodeError:
        return None


def _split_cell(cell: str, column: str = "") -> list[str]:
    """A CSV list cell: a JSON list (``["a", "b"]``) or names separated by ``|``."""
    cell = (cell or "").strip()
    if cell.startswith("["):
        value = _json_list_cell(cell, column)
        if isinstance(value, list):
            return [str(v) for v in value]
    return [part.strip() for part in cell.split("|") if part.strip()]


def _positional_cell(cell: str, column: str = "", *, numbers: bool = False) -> list[Any] | None:
    """A CSV cell holding one entry per topic: a JSON list (``null`` for none) or entries separated by ``|``, an
    empty entry meaning none; with ``numbers``, entries of digits become ints. ``None`` for an empty cell."""
    cell = (cell or "").strip()
    if not cell:
        return None
    value: Any = _json_list_cell(cell, column) if cell.startswith("[") else None
    if not isinstance(value, list):
        value = [part.strip() or None for part in cell.split("|")]
    if numbers:
        value = [int(v) if isinstance(v, str) and v.isdigit() else v for v in value]
    return value


_CSV_TEXT = ("text", "query", "question")
_CSV_TOPICS = ("topics", "related", "related_topics", "ground_truth", "titles")


def _csv_query_item(rec: Mapping[str, Any], text_col: str, topic_col: str, fusion_col: str | None,
                    extra_cols: Mapping[str, str]) -> dict[str, Any]:
    """The query item of one CSV record (as a query JSON file gives it, for :func:`_query_from_item`)."""
    item: dict[str, Any] = {"text": rec.get(text_col) or "", "topics": _split_cell(rec.get(topic_col) or "", topic_col)}
    if fusion_col is not None:
        item["fusion"] = _split_cell(rec.get(fusion_col) or "", fusion_col)
    for key, col in extra_cols.items():
        cell = rec.get(col) or ""
        item[key] = (_positional_cell(cell, col, numbers=key == "document_ids")
                     if key in ("categories", "document_ids") else cell.strip())
    return item


def _csv_query_items(text: str, name: str) -> list[tuple[str, Any]]:
    from mrag_core.textio import IngestError, check_csv_quotes

    delimiter = "\t" if _base_name(name).endswith(".tsv") else ","
    try:  # the reader would read the rest of the file into one query
        check_csv_quotes(text, delimiter, name)
    except IngestError as exc:
        raise BenchmarkFormatError(str(exc)) from exc
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    fields = {(f or "").strip().lower(): f for f in reader.fieldnames or []}
    text_col = next((fields[k] for k in _CSV_TEXT if k in fields), None)
    topic_col = next((fields[k] for k in _CSV_TOPICS if k in fields), None)
    if text_col is None or topic_col is None:
        raise BenchmarkFormatError(
            f"{name}: a query table needs a text column ({' / '.join(_CSV_TEXT)}) and a topics column "
            f"({' / '.join(_CSV_TOPICS)}; titles separated by '|'), got columns "
            f"{', '.join(repr(f) for f in reader.fieldnames or []) or '(none)'}"
        )
    fusion_col = fields.get("fusion")
    extra_cols = {key: fields[key] for key in ("categories", "document_ids", "status", "reason") if key in fields}
    items: list[tuple[str, Any]] = []
    try:
        for i, rec in enumerate(reader, start=1):
            if not any((v or "").strip() for v in rec.values() if isinstance(v, str)):
                continue
            try:
                item: Any = _csv_query_item(rec, text_col, topic_col, fusion_col, extra_cols)
            except BenchmarkFormatError as exc:  # a cell nested too deeply: this row is left out
                item = _Unreadable(str(exc))
            items.append((f"row {i}", item))
    except csv.Error as exc:
        raise BenchmarkFormatError(f"{name}: not a readable CSV file ({exc})") from exc
    if not items:
        raise BenchmarkFormatError(f"{name}: the table has no rows")
    return items


def read_query_rows(data: bytes, name: str, notes: list[str] | None = None
                    ) -> tuple[list[QueryRow], list[RowProblem]]:
    """Read a query file row by row: ``(location, query)`` for each good row and
    ``(location, problem)`` for each bad one (``"item 3"``, ``"line 3"``, ``"row 3"``).
    ``notes``: a list to append how a file not in UTF-8 was read (a spreadsheet's UTF-16 or Windows-1252 CSV,
    read as the document import reads it); without it, such a file is refused.

    Formats (optionally bz2/gzip): a JSON list (or ``{"queries": [...]}``, or an object keyed by
    aspect count) of ``{"topics"/"related", "text", "fusion"}``; JSON Lines (a bad line is one
    problem); CSV / TSV with a text column, a topics column (titles separated by ``|`` or a JSON
    list) and an optional fusion column. Raises :class:`BenchmarkFormatError` only when the
    whole file cannot be read (compression, encoding, not JSON, wrong shape, missing columns).
    """
    text = _decompressed_text(data, name, notes)
    base = _base_name(name)
    if base.endswith((".csv", ".tsv")):
        return _item_rows(_csv_query_items(text, name))
    if not text.strip():
        raise BenchmarkFormatError(f"{name}: the file is empty")
    if not base.endswith((".jsonl", ".ndjson")):
        try:
            value = loads(text)
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":
                raise BenchmarkFormatError(
                    f"{name}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
                ) from exc
        else:
            if isinstance(value, dict) and value and all(_is_int_key(k) for k in value):
                items: list[tuple[str, Any]] = []
                for key in sorted(value, key=lambda k: int(k)):
                    group = value[key]
                    if not isinstance(group, list):
                        raise BenchmarkFormatError(
                            f"{name}: entry {key!r} must be a list of queries, got {_type_name(group)}"
                        )
                    items.extend((f"[{key}] item {i}", it) for i, it in enumerate(group, start=1))
                return _item_rows(items)
            listed = _as_list(value, name, ("queries",))
            return _item_rows((f"item {i}", it) for i, it in enumerate(listed, start=1))
    rows: list[QueryRow] = []
    problems: list[RowProblem] = []
    for lineno, item, exc in json_lines(text):
        where = f"line {lineno}"
        if exc is not None:
            problems.append((where, f"not valid JSON: {exc.msg}"))
            continue
        good, bad = _item_rows([(where, item)])
        rows.extend(good)
        problems.extend(bad)
    return rows, problems


def _is_int_key(key: Any) -> bool:
    return isinstance(key, str) and key.strip().isdigit()


def load_articles(path: str | Path) -> list[Article]:
    """Load Wikipedia-format articles from ``.json``, ``.jsonl`` or their ``.bz2``/``.gz``.

    Raises :class:`BenchmarkFileNotFoundError` or :class:`BenchmarkFormatError`.
    """
    data, name = _read_path(path)
    return parse_articles(decode_benchmark_bytes(data, name), name)


def load_queries(path: str | Path) -> list[BenchQuery]:
    """Load queries (``{"topics", "text", "fusion"}``) from ``.json``/``.jsonl`` (+ ``.bz2``)."""
    data, name = _read_path(path)
    return parse_queries(decode_benchmark_bytes(data, name), name)


# --------------------------------------------------------------------------- ground truth


def resolve_ground_truth(queries: Sequence[BenchQuery], articles: Sequence[Article],
                         article_ids: Sequence[int] | None = None) -> Resolution:
    """Map each query's topic titles to article indices.

    A title maps to the articles with that exact title (falling back to a case- and
    whitespace-insensitive match). When several articles share the title, what tells them apart is,
    in this order:

    1. the query's ``document_ids`` entry, when ``article_ids`` (the articles' database ids) are given
       and that id still names an article with this title (its category may have changed since);
    2. the query's ``categories`` entry (the articles of that label, compared by :func:`~mrag_core.names.fold_name`);
    3. the other topics of the query: an article already taken by one is not taken twice, and, as in
       the MRAG benchmark (whose queries ask about documents of distinct categories), when exactly one
       candidate has a label no other topic of the query uses, it is the one.

    A topic still left with several articles gets none: it is listed in ``unresolved`` and in
    ``ambiguous`` (never silently the first). Unmatched topics are in ``unresolved``. This never raises.
    """
    exact: dict[str, list[int]] = {}
    loose: dict[str, list[int]] = {}
    for i, a in enumerate(articles):
        exact.setdefault(a.title, []).append(i)
        loose.setdefault(fold_topic(a.title), []).append(i)
    by_id = {int(d): i for i, d in enumerate(article_ids)} if article_ids is not None else {}
    labels = [a.label for a in articles]
    doc_indices: list[list[int]] = []
    unresolved: list[tuple[int, str]] = []
    ambiguous: list[tuple[int, str, int]] = []
    for qi, q in enumerate(queries):
        picked, n_candidates = _resolve_query_topics(q, exact, loose, labels, by_id)
        doc_indices.append([p for p in picked if p is not None])
        for topic, p, n in zip(q.topics, picked, n_candidates):
            if p is None:
                unresolved.append((qi, topic))
                if n > 1:
                    ambiguous.append((qi, topic, n))
    return Resolution(doc_indices=doc_indices, unresolved=unresolved, ambiguous=ambiguous)


def _resolve_query_topics(
    q: BenchQuery,
    exact: Mapping[str, list[int]],
    loose: Mapping[str, list[int]],
    labels: Sequence[str],
    by_id: Mapping[int, int],
) -> tuple[list[int | None], list[int]]:
    """One query's topics as article indices (None: no article, or several left; see
    :func:`resolve_ground_truth`) and, per topic, how many articles have its title."""
    titled = [exact.get(n) or loose.get(fold_topic(n)) or [] for n in q.topics]
    cands: list[list[int]] = []
    for j, found in enumerate(titled):
        category = q.categories[j] if j < len(q.categories) else None
        doc_id = q.document_ids[j] if j < len(q.document_ids) else None
        hinted = by_id.get(doc_id) if doc_id is not None else None
        if hinted is not None and hinted in found:  # the id still names a document of this title
            cands.append([hinted])
        elif category is not None and any(fold_name(labels[c]) == fold_name(category) for c in found):
            cands.append([c for c in found if fold_name(labels[c]) == fold_name(category)])
        else:
            cands.append(list(found))
    picked: list[int | None] = [c[0] if len(c) == 1 else None for c in cands]
    progress = True
    while progress:
        progress = False
        chosen = {p for p in picked if p is not None}
        used_labels = {labels[p] for p in picked if p is not None}
        for j, c in enumerate(cands):
            if picked[j] is not None or len(c) < 2:
                continue
            free = [x for x in c if x not in chosen]
            same = [k for k, other in enumerate(cands) if picked[k] is None and other == c]
            if len(free) == len(same) and free:  # as many topics as articles left: each gets one, in order
                for k, x in zip(same, free):
                    picked[k] = x
                progress = True
                break
            fresh = [x for x in free if labels[x] not in used_labels]
            if len(free) == 1 or len(fresh) == 1:
                picked[j] = free[0] if len(free) == 1 else fresh[0]
                progress = True
                break
    return picked, [len(t) for t in titled]
