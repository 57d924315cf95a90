"""Finding documents whose text is already present (in the upload or in the collection).

Two texts are duplicates when they are equal after Unicode NFC normalisation and collapsing
every run of whitespace to one space (case and punctuation still matter).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Collection, Iterable

from mrag_core.ingest.records import ImportIssue, ImportRecord

__all__ = ["content_hash", "dedupe"]


def content_hash(text: str) -> str:
    """SHA-256 hex digest of ``text`` after NFC normalisation and whitespace collapsing."""
    canonical = " ".join(unicodedata.normalize("NFC", text).split())
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def dedupe(
    records: Iterable[ImportRecord], existing_hashes: Collection[str] = ()
) -> tuple[list[ImportRecord], list[ImportIssue]]:
    """Keep the first record of each distinct text; drop later copies.

    Records whose hash is in ``existing_hashes`` (texts already in the collection) are dropped
    too. Each dropped record gives a warning located at its ``source`` that names what it
    duplicates. Order of the kept records is preserved.
    """
    seen: dict[str, ImportRecord] = {}
    existing = set(existing_hashes)
    unique: list[ImportRecord] = []
    issues: list[ImportIssue] = []
    for r in records:
        h = content_hash(r.text)
        if h in existing:
            issues.append(ImportIssue(r.source, f"{r.title!r} is already in the collection (same text); skipped",
                                      "warning"))
            continue
        first = seen.get(h)
        if first is not None:
            issues.append(ImportIssue(
                r.source, f"{r.title!r} has the same text as {first.title!r} ({first.source}); skipped",
                "warning"))
            continue
        seen[h] = r
        unique.append(r)
    return unique, issues
