"""Cache of LLM responses keyed by sha256 of (model, kind, messages); never stores credentials.

Contract: :func:`llm_cache_key` is deterministic (canonical JSON, sorted keys). Before a
request is stored, keys that may carry credentials (``api_key``, ``authorization``,
``headers``, ...) are removed at every nesting level.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select

from db._common import to_jsonable
from db.engine import Store
from db.errors import InvalidInputError
from db.models import LLMCacheEntry, utcnow

SECRET_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "api-key",
        "x-api-key",
        "authorization",
        "headers",
        "default_headers",
        "extra_headers",
        "password",
        "secret",
        "access_token",
        "bearer",
    }
)


@dataclass(frozen=True)
class CachedResponse:
    """A cached LLM answer with its usage numbers."""

    key: str
    model: str
    kind: str
    request: dict[str, Any]
    response_text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float | None
    created_at: datetime


@dataclass(frozen=True)
class CacheStats:
    """Size of the cache and the tokens its entries cost when first fetched."""

    n_entries: int
    prompt_tokens: int
    completion_tokens: int


def llm_cache_key(model: str, kind: str, messages: Any) -> str:
    """sha256 hex of the canonical JSON of ``[model, kind, messages]``."""
    payload = json.dumps(
        [model, kind, to_jsonable(messages)],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def strip_secrets(value: Any) -> Any:
    """``value`` with every mapping key in :data:`SECRET_KEYS` (case-insensitive) removed."""
    if isinstance(value, Mapping):
        return {
            str(k): strip_secrets(v) for k, v in value.items() if str(k).lower() not in SECRET_KEYS
        }
    if isinstance(value, (list, tuple)):
        return [strip_secrets(v) for v in value]
    return value


def llm_cache_get(store: Store, key: str) -> CachedResponse | None:
    """The cached response for ``key``, or None."""
    with store.session(readonly=True) as session:
        entry = session.get(LLMCacheEntry, key)
        if entry is None:
            return None
        return CachedResponse(
            key=entry.key,
            model=entry.model,
            kind=entry.kind,
            request=dict(entry.request or {}),
            response_text=entry.response_text,
            prompt_tokens=entry.prompt_tokens,
            completion_tokens=entry.completion_tokens,
            latency_s=entry.latency_s,
            created_at=entry.created_at,
        )


def llm_cache_put(
    store: Store,
    key: str,
    *,
    model: str,
    kind: str,
    request: Mapping[str, Any],
    response_text: str,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    latency_s: float | None = None,
) -> None:
    """Store (or replace) the response for ``key``. ``request`` is stored without
    credential-like keys (see :func:`strip_secrets`). Raises InvalidInputError for a key
    that is not a sha256 hex digest."""
    if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
        raise InvalidInputError("An LLM cache key must be a lowercase sha256 hex digest.")
    clean_request = strip_secrets(to_jsonable(dict(request)))
    with store.session() as session:
        entry = session.get(LLMCacheEntry, key)
        if entry is None:
            entry = LLMCacheEntry(key=key)
            session.add(entry)
        entry.model = model
        entry.kind = kind
        entry.request = clean_request
        entry.response_text = response_text
        entry.prompt_tokens = prompt_tokens
        entry.completion_tokens = completion_tokens
        entry.latency_s = latency_s
        entry.created_at = utcnow()


def llm_cache_stats(store: Store) -> CacheStats:
    """Entry count and summed token usage of the cache."""
    with store.session(readonly=True) as session:
        n, p, c = session.execute(
            select(
                func.count(),
                func.coalesce(func.sum(LLMCacheEntry.prompt_tokens), 0),
                func.coalesce(func.sum(LLMCacheEntry.completion_tokens), 0),
            ).select_from(LLMCacheEntry)
        ).one()
    return CacheStats(n_entries=int(n), prompt_tokens=int(p), completion_tokens=int(c))


def llm_cache_clear(store: Store, model: str | None = None) -> int:
    """Delete cached responses (of one model, or all); returns how many were deleted."""
    with store.session() as session:
        stmt = delete(LLMCacheEntry)
        if model is not None:
            stmt = stmt.where(LLMCacheEntry.model == model)
        result = session.execute(stmt)
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
