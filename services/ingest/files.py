"""Importing plain-text documents: single files, a folder, or a ZIP of ``.txt``/``.md`` files.

Conventions: the file stem is the title, except that a Markdown file whose first non-blank
line is a ``# Heading`` takes the heading as title; the name of the folder holding a file is
its label (files at the top level are unlabelled). A ZIP whose entries all sit in one common
top-level folder (what "compress folder" produces) is read as if that folder were the root.

Safety: ZIP entries with absolute paths, drive letters or ``..`` components, symbolic links
and encrypted entries are rejected with an error naming the entry; declared uncompressed
sizes are checked against the per-document cap (:data:`MAX_DOC_BYTES`) and their sum against
the upload cap (:data:`MAX_TOTAL_BYTES`) before anything is decompressed, and reads are
bounded, so a ZIP bomb is refused cheaply. Unsupported file types are listed as warnings;
hidden files and ``__MACOSX`` folders are ignored silently.
"""

from __future__ import annotations

import io
import os
import re
import stat
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mrag_core.textio import decode_bytes
from services.ingest.records import (
    MAX_DOC_BYTES,
    MAX_TOTAL_BYTES,
    ImportIssue,
    ImportPreview,
    ImportRecord,
    format_bytes,
    in_source,
    member_source,
    normalise_text,
    text_problem,
)

__all__ = [
    "TEXT_EXTENSIONS",
    "ZipMember",
    "read_text_file",
    "read_text_files",
    "read_text_folder",
    "read_text_zip",
    "safe_zip_members",
    "title_from_markdown",
    "unsafe_member_reason",
]

#: File types imported as documents.
TEXT_EXTENSIONS: tuple[str, ...] = (".txt", ".md", ".markdown")
_MD_EXTENSIONS = (".md", ".markdown")
_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$")


@dataclass(frozen=True)
class ZipMember:
    """A ZIP entry that passed the safety checks; ``path`` is a clean relative POSIX path."""

    path: str
    size: int
    info: zipfile.ZipInfo


@dataclass(frozen=True)
class _Entry:
    path: str  # relative POSIX path shown to the user
    size: int  # declared size in bytes
    read: Callable[[], bytes]


def title_from_markdown(text: str) -> str | None:
    """The heading text when the first non-blank line is ``# Heading``, else None."""
    for line in text.splitlines():
        if line.strip():
            m = _HEADING.match(line.strip())
            return m.group(1).strip() if m else None
    return None


def _is_ignored(path: str) -> bool:
    return any(p.startswith(".") or p == "__MACOSX" for p in PurePosixPath(path).parts)


def unsafe_member_reason(name: str) -> str | None:
    """Why an archive entry name escapes its folder (absolute, drive letter, ``..``), or None."""
    norm = name.replace("\\", "/")
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        return "absolute path"
    if ".." in PurePosixPath(norm).parts:
        return "'..' in the path"
    return None


def safe_zip_members(
    zf: zipfile.ZipFile,
    archive_name: str,
    *,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    strip_common_root: bool = True,
) -> tuple[list[ZipMember], list[ImportIssue]]:
    """Entries of ``zf`` that are safe to read, plus an issue for each rejected entry.

    Directories, hidden files and ``__MACOSX`` are dropped silently. When the declared
    uncompressed total exceeds ``max_total_bytes`` no member is returned and one error names
    the archive. Each issue's ``source`` is the entry as :func:`member_source` names it (the archive for the
    error about the whole archive). With ``strip_common_root``, a single top-level folder shared by every
    member is stripped from the returned paths.
    """
    members: list[ZipMember] = []
    issues: list[ImportIssue] = []
    for info in zf.infolist():
        name = info.filename
        reason = unsafe_member_reason(name)
        if reason is not None:
            issues.append(ImportIssue.of_file(member_source(archive_name, name),
                                              f"rejected: the entry escapes its folder ({reason})"))
            continue
        if info.is_dir() or _is_ignored(name.replace("\\", "/")):
            continue
        mode = info.external_attr >> 16
        if mode and stat.S_ISLNK(mode):
            issues.append(ImportIssue.of_file(member_source(archive_name, name),
                                              "rejected: symbolic links are not imported"))
            continue
        if info.flag_bits & 0x1:
            issues.append(ImportIssue.of_file(member_source(archive_name, name),
                                              "rejected: the entry is encrypted (password-protected)"))
            continue
        members.append(ZipMember(path=name.replace("\\", "/"), size=info.file_size, info=info))
    total = sum(m.size for m in members)
    if total > max_total_bytes:
        return [], issues + [ImportIssue.of_file(
            archive_name,
            f"the archive expands to {format_bytes(total)}, over the {format_bytes(max_total_bytes)} "
            "upload limit; nothing was imported",
        )]
    parts = [PurePosixPath(m.path).parts for m in members]
    if strip_common_root and parts and all(len(p) > 1 for p in parts) and len({p[0] for p in parts}) == 1:
        members = [ZipMember("/".join(p[1:]), m.size, m.info) for p, m in zip(parts, members)]
    return members, issues


def _read_bounded(zf: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int) -> bytes:
    with zf.open(info) as fh:
        return fh.read(cap + 1)


def _entries_to_preview(
    entries: Sequence[_Entry],
    source_of: Callable[[str], str],
    *,
    label_from_folder: bool,
    default_label: str | None,
    max_doc_bytes: int | None,
    issues: list[ImportIssue] | None = None,
) -> ImportPreview:
    """Records of the text files among ``entries`` and the issues met, each naming its file as ``source_of`` its
    path does (the record's ``source`` too), after the ``issues`` met before reading."""
    preview = ImportPreview(issues=list(issues or []))
    for e in entries:
        suffix = PurePosixPath(e.path).suffix.lower()
        if suffix not in TEXT_EXTENSIONS:
            preview.issues.append(ImportIssue.of_file(
                source_of(e.path),
                f"unsupported file type {suffix or '(no extension)'}; only "
                f"{', '.join(TEXT_EXTENSIONS)} files are imported",
                "warning",
            ))
            continue
        preview.n_rows_read += 1
        record, rec_issues = _entry_record(e, source_of(e.path), label_from_folder, default_label, max_doc_bytes)
        preview.issues.extend(in_source(rec_issues, source_of(e.path), e.path))
        if record is None:
            preview.n_skipped += 1
        else:
            preview.records.append(record)
    return preview


def _entry_record(
    e: _Entry,
    source: str,
    label_from_folder: bool,
    default_label: str | None,
    max_doc_bytes: int | None,
) -> tuple[ImportRecord | None, list[ImportIssue]]:
    cap = max_doc_bytes
    if cap is not None and e.size > cap:
        return None, [ImportIssue(
            e.path,
            f"the file is {format_bytes(e.size)}, over the {format_bytes(cap)} limit per document; "
            "split it into smaller files (or raise the limit and turn on chunking)",
            "error",
        )]
    try:
        data = e.read()
    except (OSError, zipfile.BadZipFile, EOFError, RuntimeError) as exc:
        return None, [ImportIssue(e.path, f"cannot be read ({exc})", "error")]
    if cap is not None and len(data) > cap:
        return None, [ImportIssue(e.path, f"the file is larger than the {format_bytes(cap)} limit per document",
                                  "error")]
    if not data.strip():
        return None, [ImportIssue(e.path, "the file is empty", "error")]
    text, _enc, issues = decode_bytes(data, e.path)
    if text is None:
        return None, issues
    text = normalise_text(text)
    problem = text_problem(text, max_doc_bytes)
    if problem is not None:
        return None, issues + [ImportIssue(e.path, problem, "error")]
    pure = PurePosixPath(e.path)
    title = None
    if pure.suffix.lower() in _MD_EXTENSIONS:
        title = title_from_markdown(text)
    label = default_label
    if label_from_folder and len(pure.parts) > 1:
        label = pure.parts[-2]
    return ImportRecord(
        title=title or pure.stem,
        text=text,
        label=label,
        source=source,
    ), issues


def read_text_file(
    data: bytes,
    name: str,
    *,
    label: str | None = None,
    max_doc_bytes: int | None = MAX_DOC_BYTES,
) -> ImportPreview:
    """One uploaded ``.txt``/``.md`` file as a preview (``label`` applies to it)."""
    return read_text_files([(name, data)], label=label, max_doc_bytes=max_doc_bytes)


def read_text_files(
    files: Sequence[tuple[str, bytes]],
    *,
    label: str | None = None,
    max_doc_bytes: int | None = MAX_DOC_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> ImportPreview:
    """Several uploaded ``(name, bytes)`` text files; ``label`` applies to all of them."""
    total = sum(len(d) for _, d in files)
    if total > max_total_bytes:
        return ImportPreview(issues=[ImportIssue(
            "upload", f"the files total {format_bytes(total)}, over the "
                      f"{format_bytes(max_total_bytes)} upload limit; nothing was imported", "error")])
    entries = [_Entry(PurePosixPath(n.replace("\\", "/")).name, len(d), (lambda d=d: d)) for n, d in files]
    return _entries_to_preview(entries, str, label_from_folder=False, default_label=label,
                               max_doc_bytes=max_doc_bytes)


def read_text_zip(
    data: bytes,
    name: str,
    *,
    label_from_folder: bool = True,
    max_doc_bytes: int | None = MAX_DOC_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> ImportPreview:
    """A ZIP of ``.txt``/``.md`` files (folder name = label when ``label_from_folder``).

    Never raises for bad content: a corrupt archive gives one error naming ``name``.
    Records' ``source``, and that of the issues of a member, is ``"<name>:<path in archive>"``
    (:func:`member_source`).
    """
    if len(data) > max_total_bytes:
        return ImportPreview(issues=[ImportIssue.of_file(
            name, f"the upload is {format_bytes(len(data))}, over the {format_bytes(max_total_bytes)} limit")])
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return ImportPreview(issues=[ImportIssue.of_file(name, f"not a valid ZIP archive ({exc})")])
    with zf:
        members, issues = safe_zip_members(zf, name, max_total_bytes=max_total_bytes)
        bound = max_doc_bytes if max_doc_bytes is not None else max_total_bytes
        entries = [
            _Entry(m.path, m.size, (lambda info=m.info: _read_bounded(zf, info, bound)))
            for m in members
        ]
        preview = _entries_to_preview(entries, lambda path: member_source(name, path),
                                      label_from_folder=label_from_folder,
                                      default_label=None, max_doc_bytes=max_doc_bytes, issues=issues)
    preview.n_rows_read += sum(1 for i in issues if i.source != name)
    preview.n_skipped += sum(1 for i in issues if i.source != name)
    return preview


def read_text_folder(
    path: str | Path,
    *,
    label_from_folder: bool = True,
    max_doc_bytes: int | None = MAX_DOC_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> ImportPreview:
    """Every ``.txt``/``.md`` file under a folder (recursively; symbolic links are skipped
    with a warning). A missing folder gives one error. Records' ``source`` is
    ``"<folder name>/<relative path>"``, and so is that of the issues of a file."""
    root = Path(path)
    if not root.is_dir():
        return ImportPreview(issues=[ImportIssue.of_file(str(root), "folder not found")])

    def source_of(rel: str) -> str:
        return f"{root.name}/{rel}"

    entries: list[_Entry] = []
    issues: list[ImportIssue] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__MACOSX")
        for fname in sorted(filenames):
            full = Path(dirpath) / fname
            rel = full.relative_to(root).as_posix()
            if _is_ignored(rel):
                continue
            if full.is_symlink():
                issues.append(ImportIssue.of_file(source_of(rel), "symbolic link skipped", "warning"))
                continue
            entries.append(_Entry(rel, full.stat().st_size, full.read_bytes))
    supported = [e for e in entries if PurePosixPath(e.path).suffix.lower() in TEXT_EXTENSIONS]
    total = sum(e.size for e in supported)
    if total > max_total_bytes:
        return ImportPreview(issues=issues + [ImportIssue.of_file(
            str(root), f"the text files total {format_bytes(total)}, over the "
                       f"{format_bytes(max_total_bytes)} upload limit; nothing was imported")])
    return _entries_to_preview(entries, source_of, label_from_folder=label_from_folder,
                               default_label=None, max_doc_bytes=max_doc_bytes, issues=issues)
