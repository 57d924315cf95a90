"""Finding documents whose text is already present (in the upload or in the collection).

Two texts are duplicates when they are equal after Unicode NFC normalisation and collapsing
every run of whitespace to one space (case and punctuation still matter).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Collection, Iterable

from services.ingest.records import ImportIssue, ImportRecord

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
    duplicates, and its label when that is lost (the kept record has another label or none).
    Order of the kept records is preserved.
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
            issues.append(ImportIssue(r.source, _same_text(r, first), "warning"))
            continue
        seen[h] = r
        unique.append(r)
    return unique, issues


def _same_text(dropped: ImportRecord, kept: ImportRecord) -> str:
    """The warning for ``dropped``, a later copy of ``kept``'s text in the same upload; it names ``dropped``'s label
    when that is lost (the kept copy has another label or none)."""
    message = f"{dropped.title!r} has the same text as {kept.title!r} ({kept.source}); skipped"
    if dropped.label is not None and dropped.label != kept.label:
        kept_label = f"has {kept.label!r}" if kept.label is not None else "has no label"
        message += (f" with its label {dropped.label!r} (the copy kept {kept_label}): check which is right after the "
                    "import")
    return message
