"""Importing the MRAG authors' benchmark corpora as previews.

* Wikipedia articles (``wikipedia_articles_v1.json(.bz2)``): a JSON list of
  ``{"title", "text", "label"}``, read row by row through the table reader so every bad item
  is reported and the rest still imports.
* The legal/accident topic layout (``<category>/<category>_<topic>.json``), from a folder or a
  ZIP (or ``.tar.bz2`` path) of it, parsed by :mod:`mrag_core.topic_layout`; label = category, and
  each document's title names its topic unless the file gives one.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

from mrag_core.benchmark import BenchmarkFormatError
from mrag_core.topic_layout import TopicDataset, load_topic_layout, parse_topic_layout
from services.ingest.files import safe_zip_members
from services.ingest.records import (
    MAX_DOC_BYTES,
    MAX_TOTAL_BYTES,
    ImportIssue,
    ImportPreview,
    ImportRecord,
    check_records,
    format_bytes,
    member_source,
)
from services.ingest.tabular import ColumnMapping, read_table

__all__ = [
    "WIKIPEDIA_MAPPING",
    "preview_topic_layout",
    "preview_wikipedia_articles",
    "topic_dataset_preview",
    "topic_of_source",
    "topic_source",
]

#: Column mapping of the authors' Wikipedia article files.
WIKIPEDIA_MAPPING = ColumnMapping(text="text", title="title", label="label")


def preview_wikipedia_articles(
    data: bytes, name: str, *, max_doc_bytes: int | None = MAX_DOC_BYTES
) -> ImportPreview:
    """Preview a Wikipedia-format article file (``.json``, ``.jsonl`` or bz2/gzip of them)."""
    fmt = "jsonl" if ".jsonl" in name.lower() else "json"
    return read_table(data, fmt, WIKIPEDIA_MAPPING, name, max_doc_bytes=max_doc_bytes)


_TOPIC_SOURCE = re.compile(r" topic (?P<topic>.+)$")


def topic_source(name: str, topic: str) -> str:
    """The ``source`` of a document imported from ``topic`` of the layout ``name``."""
    return f"{name} topic {topic}"


def topic_of_source(source: str) -> str | None:
    """The topic a document came from (inverse of :func:`topic_source`), None for other sources.
    Lets query import and topic-level scoring group the documents of a topic."""
    m = _TOPIC_SOURCE.search(source or "")
    return m.group("topic").strip() if m else None


def topic_dataset_preview(ds: TopicDataset, name: str, *, max_doc_bytes: int | None = MAX_DOC_BYTES,
                          archive: bool = False) -> ImportPreview:
    """Records of a loaded :class:`~mrag_core.topic_layout.TopicDataset` (source names the topic,
    see :func:`topic_source`). A topic file left out is an error whose ``source`` is its path, in the archive
    ``name`` (:func:`member_source`) when ``archive``, else relative to the folder ``name``."""
    records = [
        ImportRecord(title=a.title, text=a.text, label=a.label, source=topic_source(name, topic))
        for a, topic in zip(ds.articles, ds.article_topics)
    ]
    kept, issues = check_records(records, max_doc_bytes)
    bad_files = [ImportIssue.of_file(member_source(name, path) if archive else path, message)
                 for path, message in ds.skipped_files]
    issues[:0] = bad_files
    issues.extend(ImportIssue.of_file(name, w, "warning") for w in ds.warnings)
    return ImportPreview(
        records=kept,
        issues=issues,
        n_rows_read=len(records) + len(bad_files),
        n_skipped=len(records) - len(kept) + len(bad_files),
    )


def _unprefix(message: str, label: str) -> str:
    prefix = f"{label}: "
    return message[len(prefix):] if message.startswith(prefix) else message


def preview_topic_layout(
    source: str | Path | bytes,
    name: str | None = None,
    *,
    max_doc_bytes: int | None = MAX_DOC_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> ImportPreview:
    """Preview a legal/accident-style corpus: a folder or archive path, or ZIP bytes.

    A malformed topic file is one error located at its path (the other files still import);
    a source with no readable topic file at all is one error naming the first problem; ZIP
    entries escaping their folder are errors and are not read; nothing raises for bad content.
    """
    if isinstance(source, bytes):
        label = name or "upload.zip"
        if len(source) > max_total_bytes:
            return ImportPreview(issues=[ImportIssue.of_file(
                label, f"the upload is {format_bytes(len(source))}, over the "
                       f"{format_bytes(max_total_bytes)} limit")])
        try:
            zf = zipfile.ZipFile(io.BytesIO(source))
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            return ImportPreview(issues=[ImportIssue.of_file(label, f"not a valid ZIP archive ({exc})")])
        with zf:
            members, issues = safe_zip_members(zf, label, max_total_bytes=max_total_bytes,
                                               strip_common_root=False)
            if any(i.source == label for i in issues):
                return ImportPreview(issues=issues)
            files = {m.path: zf.read(m.info) for m in members if m.path.lower().endswith((".json", ".json.bz2"))}
        try:
            ds = parse_topic_layout(files, label, skip_bad_files=True)
        except BenchmarkFormatError as exc:
            return ImportPreview(issues=issues + [ImportIssue.of_file(label, _unprefix(str(exc), label))])
        preview = topic_dataset_preview(ds, label, max_doc_bytes=max_doc_bytes, archive=True)
        preview.issues[:0] = issues
        return preview
    label = name or str(source)
    try:
        ds = load_topic_layout(source, skip_bad_files=True)
    except BenchmarkFormatError as exc:
        return ImportPreview(issues=[ImportIssue.of_file(label, _unprefix(str(exc), label))])
    return topic_dataset_preview(ds, label, max_doc_bytes=max_doc_bytes, archive=Path(source).is_file())
