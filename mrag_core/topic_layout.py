"""The legal / chemical-accident topic layout of the MRAG authors' benchmarks: documents in
``<category>/<category>_<topic>.json`` files, queries naming their ``related`` topics, scored at topic level (the
ground truth of a query is every document of its topics). Files are decoded and queries parsed by
:mod:`mrag_core.benchmark`; a problem raises its :class:`~mrag_core.benchmark.BenchmarkFormatError`.

Assumptions about the topic layout (the authors ship it only as ``.tar.bz2`` archives and the
loader code is not public): a topic file holds either a JSON list of documents (strings, or
objects with the text under ``text``/``summary``/``content``/``document`` and an optional
``title``) or an object wrapping such a list under ``documents``/``docs``/``articles``/``items``,
or an object mapping document titles to texts. Query files are JSON files with ``query`` or
``queries`` as a word of their path (e.g. ``queries/legal_queries.json``) holding a list of queries,
``{"queries": [...]}`` or an object keyed by aspect count (``{"1": [...], "2": [...]}``); each query has its text under
``text``/``query``/``question`` and its topics under ``related``/``topics``/``related_topics``.
A JSON file there whose items all lack a text is not a query file and is skipped with a note
(``TopicDataset.notes``): the authors' ``legal_queries/`` holds ``generated_random.json`` (queries with
``text`` and ``related``) beside ``sampled_random.json`` (the same topics, no text).
A related name may be the bare topic, ``<category>_<topic>`` or ``<category>/<topic>``
(compared case-insensitively, with ``_`` and spaces treated alike).
"""

from __future__ import annotations

import re
import tarfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from mrag_core.benchmark import (
    MAX_DECOMPRESSED_BYTES,
    Article,
    BenchmarkFileNotFoundError,
    BenchmarkFormatError,
    BenchQuery,
    _is_int_key,
    _req_str,
    _type_name,
    decode_benchmark_bytes,
    parse_queries,
)
from mrag_core.names import fold_topic

__all__ = ["TopicDataset", "load_topic_layout", "parse_topic_layout"]


@dataclass
class TopicDataset:
    """A topic-layout benchmark (legal, chemical accidents).

    * ``articles[i]`` is a document (``label`` = category); ``article_topics[i]`` its topic.
    * ``topic_docs`` maps each topic name to the indices of its documents.
    * ``queries[q].topics`` are the related topic names as written in the query file.
    * ``ground_truth[q]`` is the sorted union of the document indices of the query's topics.
    * ``unresolved`` lists ``(query_index, related_name)`` that matched no topic.
    * ``warnings`` lists non-fatal oddities (e.g. an aspect-count key that disagrees).
    * ``skipped_files`` lists ``(path, message)`` of malformed topic files left out (only
      with ``skip_bad_files=True``; otherwise the first one raises).
    * ``notes`` says which JSON files under a query path were not read as queries: their items have no text.
    """

    articles: list[Article]
    article_topics: list[str]
    topic_docs: dict[str, list[int]]
    queries: list[BenchQuery]
    ground_truth: list[list[int]]
    query_topics: list[list[str]] = field(default_factory=list)
    unresolved: list[tuple[int, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped_files: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def categories(self) -> list[str]:
        """Sorted distinct category labels."""
        return sorted({a.label for a in self.articles})


def _pick(
    candidates: Sequence[int], labels: Sequence[str], used_labels: set[str], chosen: set[int]
) -> int:
    fresh = [c for c in candidates if c not in chosen]
    pool = fresh or list(candidates)
    for c in pool:
        if labels[c] not in used_labels:
            return c
    return pool[0]


def _resolve_names(
    names: Sequence[str],
    exact: Mapping[str, list[int]],
    loose: Mapping[str, list[int]],
    labels: Sequence[str],
) -> tuple[list[int | None], list[str]]:
    """Map each name to one key index; ambiguous names avoid labels used by other names."""
    cands: list[list[int]] = [exact.get(n) or loose.get(fold_topic(n)) or [] for n in names]
    picked: list[int | None] = [None] * len(names)
    used_labels: set[str] = set()
    chosen: set[int] = set()
    for i, c in enumerate(cands):  # unambiguous first: they fix labels
        if len(c) == 1:
            picked[i] = c[0]
            used_labels.add(labels[c[0]])
            chosen.add(c[0])
    for i, c in enumerate(cands):
        if len(c) > 1:
            p = _pick(c, labels, used_labels, chosen)
            picked[i] = p
            used_labels.add(labels[p])
            chosen.add(p)
    missing = [n for n, p in zip(names, picked) if p is None]
    return picked, missing


_TEXT_KEYS = ("text", "summary", "content", "document", "body")
_LIST_KEYS = ("documents", "docs", "articles", "items")
_JSON_SUFFIXES = (".json", ".jsonl", ".json.bz2", ".jsonl.bz2", ".json.gz")


def _is_json_name(path: str) -> bool:
    return path.lower().endswith(_JSON_SUFFIXES)


def _strip_json_suffix(name: str) -> str:
    low = name.lower()
    for suf in sorted(_JSON_SUFFIXES, key=len, reverse=True):
        if low.endswith(suf):
            return name[: -len(suf)]
    return name


def _topic_file_parts(path: str) -> tuple[str, str] | None:
    """``(category, topic)`` for ``.../<category>/<category>_<topic>.json``, else None."""
    parts = PurePosixPath(path).parts
    if len(parts) < 2 or not _is_json_name(parts[-1]):
        return None
    category, stem = parts[-2], _strip_json_suffix(parts[-1])
    prefix = category + "_"
    if stem.lower().startswith(prefix.lower()) and len(stem) > len(prefix):
        return category, stem[len(prefix):]
    return None


def _is_hidden(path: str) -> bool:
    return any(
        (p.startswith(".") and p not in (".", "..")) or p == "__MACOSX"
        for p in PurePosixPath(path).parts
    )


def _topic_documents(value: Any, name: str, topic: str) -> list[tuple[str, str]]:
    """``(title, text)`` pairs of one topic file."""
    if isinstance(value, dict):
        lst = next((value[k] for k in _LIST_KEYS if isinstance(value.get(k), list)), None)
        if lst is None:
            if value and all(isinstance(v, str) for v in value.values()):
                return [(str(k), v) for k, v in value.items()]
            raise BenchmarkFormatError(
                f"{name}: expected a list of documents, or an object with 'documents', got an "
                f"object with keys {', '.join(repr(k) for k in list(value)[:8]) or '(none)'}"
            )
        value = lst
    if not isinstance(value, list):
        raise BenchmarkFormatError(f"{name}: expected a list of documents, got {_type_name(value)}")
    if not value:
        raise BenchmarkFormatError(f"{name}: the topic has no documents")
    out: list[tuple[str, str]] = []
    for i, item in enumerate(value, start=1):
        where = f"{name}: document {i}"
        default_title = f"{topic} #{i}"
        if isinstance(item, str):
            text, title = item, default_title
        elif isinstance(item, dict):
            key = next((k for k in _TEXT_KEYS if k in item), None)
            if key is None:
                raise BenchmarkFormatError(
                    f"{where} has no 'text' (keys: {', '.join(repr(k) for k in item) or 'none'})"
                )
            text = _req_str(item, key, where)
            raw_title = item.get("title")
            title = raw_title.strip() if isinstance(raw_title, str) and raw_title.strip() else default_title
        else:
            raise BenchmarkFormatError(f"{where} must be a string or an object, got {_type_name(item)}")
        if not text.strip():
            raise BenchmarkFormatError(f"{where} is empty")
        out.append((title, text))
    return out


def _linked(root: Path) -> list[str]:
    """Relative POSIX paths of the symbolic links under the folder ``root`` (not followed: :func:`_read_tree`
    skips them, so a link cannot lead a read outside the folder)."""
    if not root.is_dir() or root.is_symlink():
        return []
    return [p.relative_to(root).as_posix() for p in sorted(root.rglob("*")) if p.is_symlink()
            and not _is_hidden(p.relative_to(root).as_posix())]


def _read_tree(root: Path) -> dict[str, bytes]:
    """Relative POSIX path -> bytes of every JSON file under ``root`` (a folder or archive); symbolic links in a
    folder are skipped (:func:`_linked`)."""
    if not root.exists():
        raise BenchmarkFileNotFoundError(f"{root}: folder or archive not found")
    files: dict[str, bytes] = {}
    if root.is_dir():
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root).as_posix()
            if p.is_file() and not p.is_symlink() and _is_json_name(rel) and not _is_hidden(rel):
                files[rel] = p.read_bytes()
        return files
    name = root.name.lower()
    total = 0
    if zipfile.is_zipfile(root):
        with zipfile.ZipFile(root) as zf:
            for info in zf.infolist():
                _check_member_path(info.filename, root)
                if info.is_dir() or not _is_json_name(info.filename) or _is_hidden(info.filename):
                    continue
                total += info.file_size
                if total > MAX_DECOMPRESSED_BYTES:
                    raise BenchmarkFormatError(f"{root}: archive content is too large")
                files[info.filename] = zf.read(info)
        return files
    if ".tar" in name or name.endswith((".tgz", ".tbz2")):
        try:
            with tarfile.open(root) as tf:
                for member in tf.getmembers():
                    _check_member_path(member.name, root)
                    if not member.isfile() or not _is_json_name(member.name) or _is_hidden(member.name):
                        continue
                    total += member.size
                    if total > MAX_DECOMPRESSED_BYTES:
                        raise BenchmarkFormatError(f"{root}: archive content is too large")
                    fh = tf.extractfile(member)
                    if fh is not None:
                        files[member.name] = fh.read()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise BenchmarkFormatError(f"{root}: not a readable tar archive ({exc})") from exc
        return files
    if _is_json_name(name):
        return {root.name: root.read_bytes()}
    raise BenchmarkFormatError(f"{root}: expected a folder, a .zip or a .tar(.bz2) archive")


def _check_member_path(member: str, archive: Path) -> None:
    p = PurePosixPath(member.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or re.match(r"^[A-Za-z]:", member):
        raise BenchmarkFormatError(f"{archive}: archive entry {member!r} escapes its folder")


_QUERY_PATH = re.compile(r"(^|[/_\-. ])quer(y|ies)([/_\-. ]|$)", re.IGNORECASE)


def _is_query_path(path: str) -> bool:
    return _is_json_name(path) and bool(_QUERY_PATH.search(path))


def parse_topic_layout(
    files: Mapping[str, bytes],
    source: str = "topic layout",
    query_files: Mapping[str, bytes] | None = None,
    *,
    skip_bad_files: bool = False,
) -> TopicDataset:
    """Build a :class:`TopicDataset` from relative paths -> bytes.

    Paths matching ``<category>/<category>_<topic>.json`` (whose category folder is not a
    ``queries`` folder) are topic files; other JSON files with ``query``/``queries`` as a word
    of their path are query files; anything else is ignored. ``query_files`` are read as
    query files whatever their names. Raises :class:`BenchmarkFormatError` when there are no
    (readable) topic files or a file is malformed; with ``skip_bad_files`` a malformed topic
    file is left out and listed in ``skipped_files`` instead (for import previews).
    """
    articles: list[Article] = []
    article_topics: list[str] = []
    topic_docs: dict[str, list[int]] = {}
    topic_category: dict[str, str] = {}
    query_sources: dict[str, bytes] = {}
    skipped: list[tuple[str, str]] = []
    for path in sorted(files):
        if _is_hidden(path):
            continue
        parts = _topic_file_parts(path)
        if parts is not None and _QUERY_PATH.search(parts[0]):
            parts = None
        if parts is None:
            if _is_query_path(path):
                query_sources[path] = files[path]
            continue
        category, topic = parts
        key = topic if topic not in topic_docs else f"{category}_{topic}"
        try:
            docs = _topic_documents(decode_benchmark_bytes(files[path], path), path, topic)
        except BenchmarkFormatError as exc:
            if not skip_bad_files:
                raise
            skipped.append((path, _unprefix(str(exc), path)))
            continue
        idxs = topic_docs.setdefault(key, [])
        topic_category[key] = category
        for title, text in docs:
            idxs.append(len(articles))
            articles.append(Article(title=title, text=text, label=category))
            article_topics.append(key)
    if not articles:
        if skipped:
            path, message = skipped[0]
            raise BenchmarkFormatError(
                f"{source}: no readable topic file; {path}: {message}"
                + (f" (and {len(skipped) - 1} more bad files)" if len(skipped) > 1 else "")
            )
        raise BenchmarkFormatError(
            f"{source}: no topic files found; expected <category>/<category>_<topic>.json files"
        )

    queries: list[BenchQuery] = []
    warnings: list[str] = []
    notes: list[str] = []
    for path, data in sorted(query_sources.items()) + sorted((query_files or {}).items()):
        value = decode_benchmark_bytes(data, path)
        if _holds_no_query_text(value):  # e.g. the authors' sampled_random.json: the topics of generated_random.json
            notes.append(f"{path}: skipped: its items have topics but no text, so they are not queries (query files "
                         "are the ones whose items have a 'text')")
            continue
        parsed = parse_queries(value, path)
        if isinstance(value, dict) and value and all(_is_int_key(k) for k in value):
            for k, items in value.items():
                bad = sum(
                    1 for it in items
                    if isinstance(it, dict) and len(it.get("related", it.get("topics", [])) or []) != int(k)
                )
                if bad:
                    warnings.append(f"{path}: {bad} queries under key {k!r} have a different number of related topics")
        queries.extend(parsed)

    if not queries and notes and query_files:  # queries were asked for, and no file given holds one
        raise BenchmarkFormatError(f"{source}: no query file with query texts; " + "; ".join(notes))
    ground_truth, query_topics, unresolved = _resolve_topics(queries, topic_docs, topic_category)
    return TopicDataset(
        articles=articles,
        article_topics=article_topics,
        topic_docs=topic_docs,
        queries=queries,
        ground_truth=ground_truth,
        query_topics=query_topics,
        unresolved=unresolved,
        warnings=warnings,
        skipped_files=skipped,
        notes=notes,
    )


_QUERY_TEXT_KEYS = ("text", "query", "question")


def _holds_no_query_text(value: Any) -> bool:
    """Whether the decoded query file ``value`` (a list of items, ``{"queries": [...]}`` or lists keyed by aspect
    count) has items that are all objects and none with a text: the topics of queries without the queries (the
    authors' legal archive ships ``sampled_random.json`` beside ``generated_random.json``)."""
    if isinstance(value, dict):
        value = value.get("queries") if isinstance(value.get("queries"), list) else [
            item for group in value.values() if isinstance(group, list) for item in group]
    if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
        return False
    return not any(key in item for item in value for key in _QUERY_TEXT_KEYS)


def _unprefix(message: str, prefix: str) -> str:
    """``message`` without a leading ``"<prefix>: "`` (the file is named apart)."""
    head = f"{prefix}: "
    return message[len(head):] if message.startswith(head) else message


def _resolve_topics(
    queries: Sequence[BenchQuery],
    topic_docs: Mapping[str, list[int]],
    topic_category: Mapping[str, str],
) -> tuple[list[list[int]], list[list[str]], list[tuple[int, str]]]:
    names = list(topic_docs)
    labels = [topic_category[n] for n in names]
    exact: dict[str, list[int]] = {}
    loose: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        cat = topic_category[n]
        bare = n[len(cat) + 1:] if n.startswith(cat + "_") else n
        for alias in {n, bare, f"{cat}_{bare}", f"{cat}/{bare}"}:
            lst = exact.setdefault(alias, [])
            if i not in lst:
                lst.append(i)
            lst2 = loose.setdefault(fold_topic(alias), [])
            if i not in lst2:
                lst2.append(i)
    ground_truth: list[list[int]] = []
    query_topics: list[list[str]] = []
    unresolved: list[tuple[int, str]] = []
    for qi, q in enumerate(queries):
        picked, missing = _resolve_names(q.topics, exact, loose, labels)
        topics = [names[p] for p in picked if p is not None]
        query_topics.append(topics)
        ground_truth.append(sorted({d for t in topics for d in topic_docs[t]}))
        unresolved.extend((qi, m) for m in missing)
    return ground_truth, query_topics, unresolved


def load_topic_layout(
    root: str | Path, queries: str | Path | None = None, *, skip_bad_files: bool = False
) -> TopicDataset:
    """Load a legal/accident-style benchmark from a folder, ``.zip`` or ``.tar(.bz2)``.

    ``queries`` optionally names a separate query file, folder or archive (the authors ship
    documents and queries as separate archives); its JSON files are all read as query files.
    Ground truth is at topic level: ``ground_truth[q]`` holds all documents of the query's
    related topics. ``skip_bad_files``: see :func:`parse_topic_layout`. Symbolic links in a folder are
    not followed: each is skipped with a warning.
    """
    root_p = Path(root)
    files = _read_tree(root_p)
    extra: dict[str, bytes] | None = None
    if queries is not None:
        q_path = Path(queries)
        extra = {}
        for rel, data in _read_tree(q_path).items():
            if q_path.is_dir():
                extra[f"{q_path}/{rel}"] = data
            elif rel == q_path.name:  # a single JSON file
                extra[str(q_path)] = data
            else:  # an archive member
                extra[f"{q_path}:{rel}"] = data
    ds = parse_topic_layout(files, str(root_p), extra, skip_bad_files=skip_bad_files)
    ds.warnings.extend(f"{rel}: symbolic link skipped (only the folder's own files are read)"
                       for rel in _linked(root_p))
    return ds
