"""Corpus import: uploads -> a preview of records and located issues, nothing written.

Readers (all return :class:`ImportPreview`, never raise for bad content):

* tables: :func:`sniff_columns`, :func:`suggest_mapping`, :func:`read_table` (JSON, JSONL, CSV,
  Parquet), :func:`iter_table` (the same rows one at a time, streamed from bytes or a path: :func:`text_source`);
* text files: :func:`read_text_file`, :func:`read_text_files`, :func:`read_text_zip`,
  :func:`read_text_folder` (``.txt``/``.md``);
* benchmarks: :func:`preview_wikipedia_articles`, :func:`preview_topic_layout`.

Post-processing: :func:`apply_chunking` (with :func:`chunk_by_chars`,
:func:`chunk_by_paragraphs`), :func:`dedupe` (with :func:`content_hash`), :func:`check_records`
(empty / over-size documents). Text decoding: :func:`decode_bytes`.
"""

from __future__ import annotations

from mrag_core.textio import decode_bytes
from services.ingest.benchmarks import preview_topic_layout, preview_wikipedia_articles
from services.ingest.chunking import apply_chunking, chunk_by_chars, chunk_by_paragraphs
from services.ingest.dedupe import content_hash, dedupe
from services.ingest.files import read_text_file, read_text_files, read_text_folder, read_text_zip
from services.ingest.records import (
    MAX_DOC_BYTES,
    MAX_TOTAL_BYTES,
    ImportIssue,
    ImportPreview,
    ImportRecord,
    IngestError,
    check_records,
)
from services.ingest.tabular import (
    ColumnMapping,
    TableRow,
    guess_format,
    iter_table,
    read_table,
    sniff_columns,
    suggest_mapping,
    text_source,
)

__all__ = [
    "MAX_DOC_BYTES",
    "MAX_TOTAL_BYTES",
    "ColumnMapping",
    "ImportIssue",
    "ImportPreview",
    "ImportRecord",
    "IngestError",
    "TableRow",
    "apply_chunking",
    "check_records",
    "chunk_by_chars",
    "chunk_by_paragraphs",
    "content_hash",
    "decode_bytes",
    "dedupe",
    "guess_format",
    "iter_table",
    "preview_topic_layout",
    "preview_wikipedia_articles",
    "read_table",
    "read_text_file",
    "read_text_files",
    "read_text_folder",
    "read_text_zip",
    "sniff_columns",
    "suggest_mapping",
    "text_source",
]
