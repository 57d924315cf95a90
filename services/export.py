"""Exporting a curated corpus: JSONL, CSV, Parquet and the MRAG benchmark JSON.

Input documents are plain mappings ``{"title", "text", "label", "label_source"}`` where
``label`` may be ``None`` (unlabelled) and ``label_source`` is ``"human"``, ``"suggestion"`` or
``None``. The ``export_*`` functions return bytes (ready for ``st.download_button``); the
``write_*`` variants write them to a path. Everything written reads back through
:mod:`services.ingest` (and the benchmark JSON through :func:`mrag_core.benchmark.load_articles`)
to the same titles, texts and labels.

Formats:

* JSONL: one object per line with the four keys (``null`` for missing label / source).
* CSV: UTF-8, header ``title,text,label,label_source``, missing values as empty cells; a cell a spreadsheet
  would run as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) gets a leading
  ``'`` (:mod:`services.csv_cells`: ``"=SUM(A1)"`` is written ``"'=SUM(A1)"``, a plain number such as ``"-5"``
  stays as it is), which the CSV import takes off again.
* Parquet: four nullable string columns.
* Benchmark JSON: the authors' ``[{"title", "text", "label"}]`` list; it needs a label per
  document, so unlabelled documents raise :class:`ExportError` unless ``unlabeled="skip"``.

Writing a file (:func:`write_whole`, used by every ``write_*``): whole or not at all, by
:func:`mrag_core.whole_file.write_whole`.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mrag_core import whole_file
from mrag_core.whole_file import WriteError
from services.csv_cells import neutralise

__all__ = [
    "EXPORT_COLUMNS",
    "EXPORT_FORMATS",
    "ExportDoc",
    "ExportError",
    "ExportFormat",
    "export",
    "export_benchmark_json",
    "export_csv",
    "export_jsonl",
    "export_parquet",
    "file_stem",
    "write_benchmark_json",
    "write_csv",
    "write_export",
    "write_jsonl",
    "write_parquet",
    "write_whole",
]

ExportDoc = Mapping[str, Any]
EXPORT_COLUMNS: tuple[str, ...] = ("title", "text", "label", "label_source")
LABEL_SOURCES: tuple[str | None, ...] = ("human", "suggestion", None)


class ExportError(ValueError):
    """The corpus cannot be exported as asked; the message says which document and why."""


@dataclass(frozen=True)
class ExportFormat:
    """File extension and MIME type of an export format (for download buttons)."""

    name: str
    extension: str
    mime: str


EXPORT_FORMATS: dict[str, ExportFormat] = {
    "jsonl": ExportFormat("JSON Lines", ".jsonl", "application/x-ndjson"),
    "csv": ExportFormat("CSV", ".csv", "text/csv"),
    "parquet": ExportFormat("Parquet", ".parquet", "application/vnd.apache.parquet"),
    "benchmark": ExportFormat("MRAG benchmark JSON", ".json", "application/json"),
}


def file_stem(name: str, fallback: str) -> str:
    """A download file name's stem for a stored ``name`` (a corpus, a query set): every run of characters other
    than ASCII letters, digits, ``_``, ``.`` and ``-`` (a ``/``, a space, a ``:``) replaced by one ``_``, and ``_``
    trimmed from both ends; ``fallback`` when nothing is left. ``"runs/2024: v1"`` -> ``"runs_2024_v1"``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or fallback


def _where(i: int, doc: ExportDoc) -> str:
    title = doc.get("title")
    return f"document {i}" + (f" ({title!r})" if isinstance(title, str) and title else "")


def _normalise(docs: Iterable[ExportDoc]) -> list[dict[str, str | None]]:
    """Validate and copy documents to ``{title, text, label, label_source}`` dicts.

    ``text`` must be a non-empty string; ``title`` a string (None -> ""); ``label`` a string
    or None (blank -> None); ``label_source`` one of :data:`LABEL_SOURCES`.
    """
    out: list[dict[str, str | None]] = []
    for i, doc in enumerate(docs, start=1):
        if not isinstance(doc, Mapping):
            raise ExportError(f"document {i} is a {type(doc).__name__}, expected a mapping")
        where = _where(i, doc)
        text = doc.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ExportError(f"{where} has no text")
        title = doc.get("title")
        if title is None:
            title = ""
        if not isinstance(title, str):
            raise ExportError(f"{where}: title must be a string, got {type(title).__name__}")
        label = doc.get("label")
        if label is not None and not isinstance(label, str):
            raise ExportError(f"{where}: label must be a string or None, got {type(label).__name__}")
        label = (label.strip() or None) if label is not None else None
        source = doc.get("label_source")
        if source not in LABEL_SOURCES:
            raise ExportError(
                f"{where}: label_source must be 'human', 'suggestion' or None, got {source!r}"
            )
        out.append({"title": title, "text": text, "label": label, "label_source": source})
    return out


def export_jsonl(docs: Iterable[ExportDoc]) -> bytes:
    """UTF-8 JSON Lines, one ``{title, text, label, label_source}`` object per line."""
    rows = _normalise(docs)
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def export_csv(docs: Iterable[ExportDoc]) -> bytes:
    """UTF-8 CSV with header ``title,text,label,label_source``; None becomes an empty cell and a cell that a
    spreadsheet would run as a formula is neutralised (:func:`services.csv_cells.neutralise`)."""
    rows = _normalise(docs)
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=list(EXPORT_COLUMNS), quoting=csv.QUOTE_MINIMAL)
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if v is None else neutralise(v)) for k, v in r.items()})
    return buf.getvalue().encode("utf-8")


def export_parquet(docs: Iterable[ExportDoc]) -> bytes:
    """Parquet with four nullable string columns (needs ``pyarrow``)."""
    rows = _normalise(docs)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
        raise ExportError("Parquet export needs the 'pyarrow' package") from exc
    schema = pa.schema([(c, pa.string()) for c in EXPORT_COLUMNS])
    table = pa.Table.from_pylist(rows, schema=schema)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def export_benchmark_json(
    docs: Iterable[ExportDoc], *, unlabeled: Literal["error", "skip"] = "error"
) -> bytes:
    """The MRAG authors' article format: a JSON list of ``{"title", "text", "label"}``.

    Every document needs a label; with ``unlabeled="error"`` (default) unlabelled documents
    raise :class:`ExportError` naming how many and the first one, with ``"skip"`` they are
    left out. Raises when nothing is left to export.
    """
    if unlabeled not in ("error", "skip"):
        raise ExportError(f"unlabeled must be 'error' or 'skip', got {unlabeled!r}")
    rows = _normalise(docs)
    missing = [r for r in rows if r["label"] is None]
    if missing and unlabeled == "error":
        first = missing[0]["title"] or (missing[0]["text"] or "")[:40]
        raise ExportError(
            f"{len(missing)} document{'s have' if len(missing) != 1 else ' has'} no label "
            f"(first: {first!r}); the MRAG benchmark format needs a label for every document. "
            "Label them, or export with unlabelled documents skipped"
        )
    kept = [{"title": r["title"], "text": r["text"], "label": r["label"]} for r in rows if r["label"] is not None]
    if not kept:
        raise ExportError("no labelled documents to export")
    return json.dumps(kept, ensure_ascii=False, indent=1).encode("utf-8")


_EXPORTERS = {
    "jsonl": export_jsonl,
    "csv": export_csv,
    "parquet": export_parquet,
    "benchmark": export_benchmark_json,
}


def export(docs: Iterable[ExportDoc], fmt: str) -> bytes:
    """Export in the format named by ``fmt`` (a key of :data:`EXPORT_FORMATS`)."""
    try:
        fn = _EXPORTERS[fmt]
    except KeyError:
        raise ExportError(f"unknown export format {fmt!r}; choose one of {', '.join(_EXPORTERS)}") from None
    return fn(docs)


def write_whole(data: bytes, path: str | Path) -> Path:
    """Write ``data`` to ``path`` whole or not at all, as :func:`mrag_core.whole_file.write_whole` does; returns the
    path. Raises :class:`ExportError` where it cannot (the target is not a regular file, its folder is missing...)."""
    try:
        return whole_file.write_whole(data, path)
    except WriteError as exc:
        raise ExportError(str(exc)) from exc


def write_jsonl(docs: Iterable[ExportDoc], path: str | Path) -> Path:
    """Write :func:`export_jsonl` output to ``path``; returns the path."""
    return write_whole(export_jsonl(docs), path)


def write_csv(docs: Iterable[ExportDoc], path: str | Path) -> Path:
    """Write :func:`export_csv` output to ``path``; returns the path."""
    return write_whole(export_csv(docs), path)


def write_parquet(docs: Iterable[ExportDoc], path: str | Path) -> Path:
    """Write :func:`export_parquet` output to ``path``; returns the path."""
    return write_whole(export_parquet(docs), path)


def write_benchmark_json(
    docs: Iterable[ExportDoc], path: str | Path, *, unlabeled: Literal["error", "skip"] = "error"
) -> Path:
    """Write :func:`export_benchmark_json` output to ``path``; returns the path."""
    return write_whole(export_benchmark_json(docs, unlabeled=unlabeled), path)


def write_export(docs: Iterable[ExportDoc], fmt: str, path: str | Path) -> Path:
    """Write :func:`export` output (format ``fmt``) to ``path``; returns the path."""
    return write_whole(export(docs, fmt), path)
