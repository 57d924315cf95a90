"""Response cache for LLM calls, so re-running an evaluation costs no tokens.

A cache maps a *key* to a stored :class:`~services.llm.client.LLMReply` (its text, token counts,
latency, model and ``finish_reason``: an answer cut at the token limit stays cut off when replayed).
The key is :func:`cache_key`: the SHA-256 hex digest of a canonical JSON
document ``{"kind", "model", "messages", "params"}`` (sorted keys, compact
separators, UTF-8), so the same request always maps to the same key and any
change to the model, the prompt or a generation parameter (temperature,
max_tokens, json_mode) maps to a different one.

Implementations share the minimal :class:`LLMCache` protocol
(``get(key) -> LLMReply | None`` and ``put(key, kind, model, reply)``):

* :class:`MemoryCache` - a thread-safe dict, for one process;
* :class:`JsonFileCache` - one JSON file, rewritten atomically (temp file in the
  same folder + ``os.replace``) on every ``put``;
* the SQLite-backed cache in ``db/`` (same shape).

:func:`cached_complete` is the single entry point used by the engine: on a hit
it returns the stored reply with ``latency_s == 0.0`` and ``hit=True`` without
any HTTP request; on a miss it calls the client and stores the reply if it is
acceptable (non-blank text, plus an optional caller check), so a failed or empty answer is never
replayed from the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

from services.llm.client import LLMClient, LLMReply, StopFlag, scrub_answer

__all__ = [
    "CacheError",
    "JsonFileCache",
    "LLMCache",
    "MemoryCache",
    "cache_key",
    "cached_complete",
    "reply_from_dict",
    "reply_to_dict",
]


class CacheError(RuntimeError):
    """A cache file cannot be read or written (message names the file and the cause)."""


@runtime_checkable
class LLMCache(Protocol):
    """Minimal cache contract: look a reply up by key, store a reply under a key."""

    def get(self, key: str) -> LLMReply | None:
        """Return the stored reply for ``key`` or ``None``."""
        ...

    def put(self, key: str, kind: str, model: str, reply: LLMReply) -> None:
        """Store ``reply`` under ``key``; ``kind``/``model`` are bookkeeping for listings."""
        ...


def cache_key(
    model: str,
    kind: str,
    messages: list[dict[str, str]],
    params: Mapping[str, Any] | None = None,
) -> str:
    """SHA-256 hex digest of the canonical JSON of the request.

    Canonical JSON = ``json.dumps({"kind", "messages", "model", "params"},
    sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` encoded as UTF-8.
    ``params`` holds the generation parameters that change the answer
    (``None`` values are dropped, so "not given" and ``None`` are the same key).
    """
    clean_params = {k: v for k, v in (params or {}).items() if v is not None}
    document = {
        "kind": kind,
        "messages": [dict(m) for m in messages],
        "model": model,
        "params": clean_params,
    }
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def reply_to_dict(reply: LLMReply) -> dict[str, Any]:
    """JSON-ready dict of a reply (``finish_reason`` is ``null`` when the endpoint gave none; ``logprobs``, a list
    of ``[token, logprob]``, only when the reply has them)."""
    out = {
        "text": reply.text,
        "prompt_tokens": int(reply.prompt_tokens),
        "completion_tokens": int(reply.completion_tokens),
        "latency_s": float(reply.latency_s),
        "model": reply.model,
        "finish_reason": reply.finish_reason,
    }
    if reply.logprobs is not None:
        out["logprobs"] = [[token, float(logprob)] for token, logprob in reply.logprobs]
    return out


def logprobs_from_json(value: Any) -> tuple[tuple[str, float], ...] | None:
    """Token log-probabilities as :func:`reply_to_dict` writes them; None when absent or malformed."""
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], (int, float)) and not isinstance(item[1], bool)):
            return None
        out.append((item[0], float(item[1])))
    return tuple(out)


def reply_from_dict(data: Mapping[str, Any]) -> LLMReply:
    """Inverse of :func:`reply_to_dict`; raises ``KeyError``/``TypeError``/``ValueError`` on bad data.

    An entry written before ``finish_reason`` was stored has none: it reads as ``None`` (not known to be cut off).
    """
    finish = data.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise TypeError(f"finish_reason must be a string or null, got {type(finish).__name__}")
    return LLMReply(
        text=str(data["text"]),
        prompt_tokens=int(data["prompt_tokens"]),
        completion_tokens=int(data["completion_tokens"]),
        latency_s=float(data["latency_s"]),
        model=str(data["model"]),
        finish_reason=finish,
        logprobs=logprobs_from_json(data.get("logprobs")),
    )


class MemoryCache:
    """In-process cache (a dict guarded by a lock; safe for ``run_concurrent`` workers)."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, str, LLMReply]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> LLMReply | None:
        """Return the stored reply for ``key`` or ``None``."""
        with self._lock:
            entry = self._entries.get(key)
        return None if entry is None else entry[2]

    def put(self, key: str, kind: str, model: str, reply: LLMReply) -> None:
        """Store (or overwrite) ``reply`` under ``key``."""
        with self._lock:
            self._entries[key] = (kind, model, reply)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class JsonFileCache:
    """Cache persisted as one JSON file ``{key: {"kind", "model", "reply": {...}}}``.

    The file is read once, lazily, on first use; a missing file is an empty
    cache. Writing rewrites the whole file atomically: the JSON is written to a
    temporary file in the same folder, flushed and ``fsync``-ed, then moved over
    the target with ``os.replace``, so a crash never leaves a half-written
    cache. With ``autoflush=True`` (default) every ``put`` writes; with
    ``autoflush=False`` puts stay in memory until :meth:`flush` (or the end of a
    ``with`` block), which avoids rewriting a large file once per entry during
    a batch. A file that exists but is not a valid cache raises
    :class:`CacheError` (it is never silently overwritten).
    """

    def __init__(self, path: str | os.PathLike[str], *, autoflush: bool = True) -> None:
        self.path = Path(path)
        self.autoflush = autoflush
        self._entries: dict[str, dict[str, Any]] | None = None
        self._dirty = False
        self._lock = threading.Lock()

    def _load(self) -> dict[str, dict[str, Any]]:
        """Return the in-memory entries, reading the file on first use (caller holds the lock)."""
        if self._entries is not None:
            return self._entries
        if not self.path.exists():
            self._entries = {}
            return self._entries
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CacheError(f"LLM cache file {self.path} cannot be read: {exc}") from exc
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise CacheError(
                f"LLM cache file {self.path} is not an LLM cache (expected a JSON object of entries)."
            )
        self._entries = data
        return self._entries

    def get(self, key: str) -> LLMReply | None:
        """Return the stored reply for ``key`` or ``None`` (a malformed entry counts as missing)."""
        with self._lock:
            entry = self._load().get(key)
        if entry is None:
            return None
        try:
            return reply_from_dict(entry["reply"])
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, key: str, kind: str, model: str, reply: LLMReply) -> None:
        """Store ``reply`` under ``key``; rewrite the file atomically now if ``autoflush``."""
        with self._lock:
            entries = self._load()
            entries[key] = {"kind": kind, "model": model, "reply": reply_to_dict(reply)}
            self._dirty = True
            if self.autoflush:
                self._write(entries)
                self._dirty = False

    def flush(self) -> None:
        """Write pending entries (no-op when nothing changed since the last write)."""
        with self._lock:
            if self._dirty and self._entries is not None:
                self._write(self._entries)
                self._dirty = False

    def __enter__(self) -> JsonFileCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.flush()

    def _write(self, entries: Mapping[str, Any]) -> None:
        """Atomic write: temp file in the target folder, fsync, ``os.replace``."""
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(entries, handle, ensure_ascii=False, sort_keys=True)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp_name, self.path)
            except BaseException:
                if os.path.exists(tmp_name):
                    os.unlink(tmp_name)
                raise
        except OSError as exc:
            raise CacheError(f"LLM cache file {self.path} cannot be written: {exc}") from exc

    def __len__(self) -> int:
        with self._lock:
            return len(self._load())


def _default_accept(reply: LLMReply) -> bool:
    """Store only replies with non-blank text."""
    return bool(reply.text and reply.text.strip())


def cached_complete(
    client: LLMClient,
    cache: LLMCache | None,
    kind: str,
    messages: list[dict[str, str]],
    *,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    json_mode: bool = False,
    json_schema: dict[str, Any] | None = None,
    logprobs: int | None = None,
    timeout_retries: int = 1,
    accept: Callable[[LLMReply], bool] | None = None,
    cancel: StopFlag | None = None,
) -> tuple[LLMReply, bool]:
    """``client.complete`` behind ``cache``; returns ``(reply, hit)``.

    * ``cache is None``: always calls the client, ``hit=False``.
    * hit: the stored reply with ``latency_s=0.0`` (token counts are those of the
      original call, i.e. what the answer *cost* once; nothing is spent now) and its
      ``finish_reason``, so an answer cut at the token limit reads as cut off from the cache too;
      its text is scrubbed of the configured key (:func:`~services.llm.client.scrub_answer`), as
      every new answer is, so an entry stored by an earlier version never shows it again.
    * miss: calls the client (errors propagate, nothing is stored) and stores the
      reply only if its text is not blank and ``accept(reply)`` (when given) is
      true, so callers can keep unparseable answers out of the cache.

    The key is :func:`cache_key` of ``client.config.model``, ``kind``, ``messages``
    and ``{temperature, max_tokens, json_mode}`` (plus ``json_schema`` and ``logprobs`` when given). ``cancel``,
    ``json_schema``, ``logprobs`` and ``timeout_retries`` go to ``client.complete`` (a set event ends a retry wait
    with :class:`~services.llm.client.LLMCancelled`).
    """
    options: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "json_mode": json_mode,
                               "json_schema": json_schema, "logprobs": logprobs}
    if cache is None:
        reply = client.complete(messages, timeout_retries=timeout_retries, cancel=cancel, **options)
        return reply, False
    model = client.config.model
    params = options
    key = cache_key(model, kind, messages, params)
    stored = cache.get(key)
    if stored is not None:  # scrubbed again: an entry stored before answers were scrubbed may hold the key
        secret = client.config.api_key
        return replace(stored, latency_s=0.0, text=scrub_answer(stored.text, secret),
                       model=scrub_answer(stored.model, secret)), True
    reply = client.complete(messages, timeout_retries=timeout_retries, cancel=cancel, **options)
    if _default_accept(reply) and (accept is None or accept(reply)):
        cache.put(key, kind, model, reply)
    return reply, False
