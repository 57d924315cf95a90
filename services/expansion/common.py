"""Shared pieces of the LLM query expansions: result type, error type, cached ask-and-parse.

Every expansion is one chat completion through
:func:`~services.llm.cache.cached_complete` (so a repeated call with the same
model, prompt and parameters is served from the cache without an HTTP request)
followed by a parser. A reply is stored in the cache only if its parser
accepts it, and an answer the parser rejects raises :class:`ExpansionError`
- an expansion never silently returns garbage. Transport failures raise
:class:`~services.llm.client.LLMError` unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from services.llm.cache import LLMCache, cached_complete
from services.llm.client import LLMClient, LLMReply, StopFlag
from services.querygen.checks import clean_subqueries, dedupe

__all__ = ["Expansion", "ExpansionError", "ask_and_parse", "parse_list", "preview", "strip_code_fence"]

_FENCE = re.compile(r"```[\w-]*\s*\n?(.*?)```", re.DOTALL)


class ExpansionError(ValueError):
    """The LLM answered, but not in a usable form (message says which expansion and shows the answer's start).

    When raised by :func:`ask_and_parse`, ``prompt_tokens`` / ``completion_tokens`` /
    ``latency_s`` are those of the rejected answer (tokens were spent even though
    the answer is unusable); ``answer`` is its text. They are 0 / ``""`` otherwise.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    answer: str = ""


@dataclass(frozen=True)
class Expansion:
    """Texts produced by one expansion call plus its cost.

    ``prompt_tokens``/``completion_tokens`` are those of the answer (for a cache
    hit: what it cost when it was first made); ``cached=True`` means no request
    was sent now (``latency_s == 0``) and nothing was spent.
    """

    texts: list[str]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool


def strip_code_fence(text: str) -> str:
    """The content of the first fenced block (```` ```lang ... ``` ````) if any, else ``text``; stripped."""
    match = _FENCE.search(text)
    return (match.group(1) if match else text).strip()


def preview(text: str, limit: int = 120) -> str:
    """One-line start of ``text`` for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def parse_list(text: str, n: int, what: str, *, cut_off: bool = False) -> list[str]:
    """The answer's list items (:func:`~services.querygen.checks.clean_subqueries`: only the numbered or
    bulleted items when there are any, without preamble, sign-off, quotes or Markdown), those with a letter,
    de-duplicated and clamped to ``n``; :class:`ExpansionError` ("contains no <what>") when none remains.

    ``cut_off``: the endpoint stopped the answer at its token limit, so its last item is half-written; it is
    dropped before the rest is de-duplicated and clamped (the rule query generation applies to its Fusion
    sub-queries, :mod:`services.querygen.generate`).
    """
    items = [item for item in clean_subqueries(text) if any(ch.isalpha() for ch in item)]
    if cut_off and items:
        items = items[:-1]
        if not items:
            raise ExpansionError(
                f"The LLM answer contains no {what}: its only item was cut off at the token limit "
                f"(raise the endpoint's or the request's token limit): {preview(text)!r}"
            )
    items = dedupe(items)[:n]
    if not items:
        raise ExpansionError(f"The LLM answer contains no {what}: {preview(text)!r}")
    return items


def ask_and_parse(
    client: LLMClient,
    cache: LLMCache | None,
    kind: str,
    messages: list[dict[str, str]],
    parse: Callable[[LLMReply], list[str]],
    *,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    json_mode: bool = False,
    cancel: StopFlag | None = None,
) -> Expansion:
    """Ask (through the cache), parse, and wrap as :class:`Expansion`.

    ``parse`` gets the reply (its text, and ``cut_off`` for an answer stopped at the token limit, also when
    replayed from the cache) and must return a non-empty list or raise :class:`ExpansionError`.
    Replies that ``parse`` rejects are not cached; the error raised then carries the
    rejected reply's token counts and latency. ``cancel`` ends the client's retry waits
    (:class:`~services.llm.client.LLMCancelled`).
    """

    def accept(reply: LLMReply) -> bool:
        try:
            return bool(parse(reply))
        except ExpansionError:
            return False

    reply, hit = cached_complete(
        client, cache, kind, messages,
        temperature=temperature, max_tokens=max_tokens, json_mode=json_mode, accept=accept, cancel=cancel,
    )
    try:
        texts = parse(reply)
        if not texts:
            raise ExpansionError(f"The {kind} expansion produced no text from the LLM answer {preview(reply.text)!r}.")
    except ExpansionError as exc:
        exc.prompt_tokens, exc.completion_tokens = reply.prompt_tokens, reply.completion_tokens
        exc.latency_s, exc.answer = reply.latency_s, reply.text
        raise
    return Expansion(
        texts=list(texts),
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        latency_s=reply.latency_s,
        cached=hit,
    )
