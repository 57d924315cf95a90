"""The LLM answer cache on the app's store: one class for every workflow that calls the LLM."""

from __future__ import annotations

from typing import Any, Mapping

import db
from services.llm.cache import logprobs_from_json
from services.llm.client import LLMReply

__all__ = ["StoreLLMCache", "stored_finish_reason"]


def stored_finish_reason(request: Mapping[str, Any]) -> str | None:
    """The ``finish_reason`` kept in an entry's request JSON; ``None`` for an entry written before it was kept
    (or one whose value is not a string): such an answer is not known to be cut off."""
    finish = request.get("finish_reason")
    return finish if isinstance(finish, str) else None


class StoreLLMCache:
    """:class:`services.llm.cache.LLMCache` on the store's ``llm_cache`` table (survives restarts).

    Keys come from :func:`services.llm.cache.cache_key` (model, messages, parameters); the table
    holds the answer text, its token counts and latency, never the API key. The entry's request JSON is
    ``{"kind", "model", "finish_reason"}``: the endpoint's ``finish_reason`` lives there (the table has no
    column for it), so an answer cut at the token limit (``"length"``) still reads as cut off when replayed; so do
    the answer's token log-probabilities (``"logprobs"``, when it has them: a label's score is computed from them).
    """

    def __init__(self, store: db.Store) -> None:
        self._store = store

    def get(self, key: str) -> LLMReply | None:
        hit = db.llm_cache_get(self._store, key)
        if hit is None:
            return None
        return LLMReply(
            text=hit.response_text, prompt_tokens=int(hit.prompt_tokens or 0),
            completion_tokens=int(hit.completion_tokens or 0), latency_s=float(hit.latency_s or 0.0), model=hit.model,
            finish_reason=stored_finish_reason(hit.request), logprobs=logprobs_from_json(hit.request.get("logprobs")),
        )  # fmt: skip

    def put(self, key: str, kind: str, model: str, reply: LLMReply) -> None:
        db.llm_cache_put(
            self._store, key, model=model, kind=kind,
            request={"kind": kind, "model": model, "finish_reason": reply.finish_reason,
                     **({"logprobs": [list(pair) for pair in reply.logprobs]} if reply.logprobs else {})},
            response_text=reply.text, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
            latency_s=reply.latency_s,
        )  # fmt: skip
