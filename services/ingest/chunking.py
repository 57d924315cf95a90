"""Splitting long documents into chunks before they enter a collection.

The MRAG paper's unit of retrieval is an overview of at least 800 characters, hence
:func:`chunk_by_paragraphs`' default ``min_chars=800``: consecutive paragraphs are merged until
a chunk reaches that size. :func:`chunk_by_chars` cuts fixed-size windows (with overlap) at
whitespace when possible. :func:`apply_chunking` turns records into part records titled
``"<title> (part i/n)"`` that remember their parent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Literal

from services.ingest.records import ImportRecord

__all__ = ["ChunkMethod", "apply_chunking", "chunk_by_chars", "chunk_by_paragraphs"]

ChunkMethod = Literal["paragraphs", "chars"]
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n+")


def chunk_by_chars(text: str, size: int, overlap: int = 0) -> list[str]:
    """Cut ``text`` into chunks of at most ``size`` characters, consecutive chunks sharing
    about ``overlap`` characters.

    Cuts fall on the last whitespace of the window (a word longer than ``size`` is cut
    hard); overlaps also start on a word boundary when possible.
    Chunks are stripped; blank chunks are dropped; an empty text gives ``[]``. Raises
    ``ValueError`` unless ``size > 0`` and ``0 <= overlap < size``.
    """
    if size <= 0:
        raise ValueError(f"chunk size must be positive, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must be between 0 and size-1 ({size - 1}), got {overlap}")
    n = len(text)
    chunks: list[str] = []
    start = _skip_space(text, 0)
    while start < n:
        end = min(start + size, n)
        if end < n and not text[end].isspace():
            cut = _last_space(text, start, end)
            if cut is not None:
                end = cut
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= n:
            break
        nxt = end - overlap if overlap else end
        if overlap and nxt > start and not text[nxt - 1].isspace():
            boundary = _first_space(text, nxt, end)
            if boundary is not None:
                nxt = boundary
        nxt = max(nxt, start + 1)
        start = _skip_space(text, nxt)
    return chunks


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _last_space(text: str, lo: int, hi: int) -> int | None:
    for i in range(hi, lo, -1):
        if text[i - 1].isspace():
            return i - 1
    return None


def _first_space(text: str, lo: int, hi: int) -> int | None:
    for i in range(lo, hi):
        if text[i].isspace():
            return i
    return None


def chunk_by_paragraphs(text: str, min_chars: int = 800, max_chars: int = 4000) -> list[str]:
    """Group paragraphs (separated by blank lines) into chunks of at least ``min_chars``.

    Consecutive paragraphs are joined with a blank line until the chunk reaches
    ``min_chars``; a paragraph longer than ``max_chars`` is split with :func:`chunk_by_chars`.
    A short remainder at the end is merged into the previous chunk when that stays within
    ``max_chars``. No chunk exceeds ``max_chars``. Raises ``ValueError`` unless
    ``0 < min_chars <= max_chars``.
    """
    if not 0 < min_chars <= max_chars:
        raise ValueError(f"need 0 < min_chars <= max_chars, got {min_chars} and {max_chars}")
    paragraphs: list[str] = []
    for para in _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n").replace("\r", "\n")):
        para = para.strip()
        if not para:
            continue
        if len(para) > max_chars:
            paragraphs.extend(chunk_by_chars(para, max_chars))
        else:
            paragraphs.append(para)
    chunks: list[str] = []
    current = ""
    for para in paragraphs:
        candidate = f"{current}\n\n{para}" if current else para
        if current and len(candidate) > max_chars:
            chunks.append(current)
            current = para
        else:
            current = candidate
        if len(current) >= min_chars:
            chunks.append(current)
            current = ""
    if current:
        if chunks and len(chunks[-1]) + 2 + len(current) <= max_chars:
            chunks[-1] = f"{chunks[-1]}\n\n{current}"
        else:
            chunks.append(current)
    return chunks


def apply_chunking(
    records: Iterable[ImportRecord],
    *,
    method: ChunkMethod = "paragraphs",
    size: int = 1500,
    overlap: int = 150,
    min_chars: int = 800,
    max_chars: int = 4000,
) -> list[ImportRecord]:
    """Split each record's text; records that stay in one piece are returned unchanged.

    ``method="paragraphs"`` uses :func:`chunk_by_paragraphs` (``min_chars``, ``max_chars``);
    ``method="chars"`` uses :func:`chunk_by_chars` (``size``, ``overlap``). A record split in
    ``n`` parts becomes ``n`` records titled ``"<title> (part i/n)"`` (i from 1) with
    ``parent_title=<title>``, ``chunk_index=i-1``, ``chunk_count=n``, and the same label
    and source.
    """
    if method not in ("paragraphs", "chars"):
        raise ValueError(f"unknown chunking method {method!r}; use 'paragraphs' or 'chars'")
    out: list[ImportRecord] = []
    for r in records:
        if method == "paragraphs":
            parts = chunk_by_paragraphs(r.text, min_chars=min_chars, max_chars=max_chars)
        else:
            parts = chunk_by_chars(r.text, size, overlap)
        if len(parts) <= 1:
            out.append(r)
            continue
        n = len(parts)
        out.extend(
            replace(r, title=f"{r.title} (part {i}/{n})", text=part,
                    parent_title=r.title, chunk_index=i - 1, chunk_count=n)
            for i, part in enumerate(parts, start=1)
        )
    return out
