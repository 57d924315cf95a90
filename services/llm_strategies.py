"""The LLM half of the LLM-assisted retrieval strategies: asking the endpoint for each question's expansion.

The strategies themselves (names, families, :class:`~mrag_core.llm_strategies.LLMOptions`, the search over the
expansion texts' embeddings, the cost totals) are the engine's :mod:`mrag_core.llm_strategies`; this module writes
the texts they search:

* ``multi-query``: ``n_rewrites`` rewrites of the question (:func:`~services.expansion.rewrite_queries`);
* ``hyde``: one hypothetical answer passage (:func:`~services.expansion.hypothetical_passage`);
* ``intent``: ``n_answers`` plausible answers decomposed into statements
  (:func:`~services.expansion.intent_statements`).

LLM answers go through :func:`~services.llm.cache.cached_complete` (key = model, prompt and
generation parameters), so a repeated run costs no tokens. An unusable answer or a transport
failure for one question becomes a failed :class:`ExpansionOutcome` (``error`` set, tokens of a
rejected answer still counted); it never raises out of :func:`expand_many`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from mrag_core.llm_strategies import LLM_FAMILIES, LLMOptions
from services.expansion import (
    Expansion,
    ExpansionError,
    hypothetical_passage,
    intent_statements,
    rewrite_queries,
)
from services.llm.breaker import Breaker
from services.llm.cache import LLMCache
from services.llm.client import LLMCancelled, LLMClient, LLMError, StopFlag
from services.llm.concurrency import Outcome, run_concurrent

__all__ = ["ExpansionOutcome", "expand", "expand_many", "expand_one"]


@dataclass(frozen=True)
class ExpansionOutcome:
    """One question's expansion for one family, or its failure.

    ``texts`` is empty when it failed (``error`` set). Token counts are those of the answer (of
    a cache hit: what it cost once; of a rejected answer: what was spent on it); ``cached`` means
    no request was sent now (``latency_s == 0``).
    """

    family: str
    texts: tuple[str, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    error: str | None = None
    cancelled: bool = False
    sent: bool = True

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled and bool(self.texts)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def spent_tokens(self) -> int:
        """Tokens this call actually spent (0 for a cache hit)."""
        return 0 if self.cached else self.tokens

    def record(self) -> dict[str, Any]:
        """JSON-ready record for a result's ``details["llm"]``."""
        out: dict[str, Any] = {
            "family": self.family, "texts": list(self.texts), "prompt_tokens": int(self.prompt_tokens),
            "completion_tokens": int(self.completion_tokens), "latency_s": float(self.latency_s),
            "cached": bool(self.cached),
        }
        if self.error is not None:
            out["error"] = self.error
        if not self.sent:
            out["not_sent"] = True
        return out

    @classmethod
    def from_expansion(cls, family: str, exp: Expansion) -> "ExpansionOutcome":
        return cls(family, tuple(exp.texts), exp.prompt_tokens, exp.completion_tokens, exp.latency_s, exp.cached)


def expand(client: LLMClient, family: str, question: str, options: LLMOptions = LLMOptions(),
           cache: LLMCache | None = None, *, cancel: StopFlag | None = None) -> Expansion:
    """The expansion of ``question`` for ``family`` (raises ExpansionError / LLMError / ValueError).

    ``cancel`` ends the client's retry waits: once it is set, a request waiting to retry raises
    :class:`~services.llm.client.LLMCancelled` instead of being sent again (nothing is cached)."""
    if family == "multi-query":
        return rewrite_queries(client, question, options.n_rewrites, cache, cancel=cancel)
    if family == "hyde":
        return hypothetical_passage(client, question, cache, cancel=cancel)
    if family == "intent":
        return intent_statements(client, question, options.n_answers, cache, cancel=cancel)
    raise ValueError(f"unknown LLM family {family!r}: use {', '.join(LLM_FAMILIES)}")


def expand_one(client: LLMClient, family: str, question: str, options: LLMOptions = LLMOptions(),
               cache: LLMCache | None = None, breaker: Breaker | None = None) -> ExpansionOutcome:
    """:func:`expand` that never raises for a bad answer or a failed request: a failed outcome instead (an
    endpoint-wide failure also trips ``breaker``). The retry waits end when ``breaker``'s cancel event is set.
    After the user's Stop, :class:`~services.llm.client.LLMCancelled` propagates (the question stays to do;
    :func:`expand_many` reports it as cancelled). After another request tripped the breaker, the question is a
    failed outcome that was sent (its request got the answer it waits out; ``sent`` stays True, so
    :func:`cost_summary` counts that request), its ``error`` naming the breaker's error."""
    cancel = breaker.cancel_event if breaker is not None else None
    try:
        return ExpansionOutcome.from_expansion(family, expand(client, family, question, options, cache,
                                                              cancel=cancel))
    except LLMCancelled:
        if breaker is None or breaker.cancelled or not breaker.tripped:
            raise
        return ExpansionOutcome(family, (), error=f"sent, then stopped while waiting to retry: an earlier request "
                                                  f"failed: {breaker.error}")
    except ExpansionError as exc:
        return ExpansionOutcome(family, (), exc.prompt_tokens, exc.completion_tokens, exc.latency_s, False,
                                f"unusable LLM answer: {exc}")
    except LLMError as exc:
        if breaker is not None:
            breaker.record(exc)
        return ExpansionOutcome(family, (), error=f"{type(exc).__name__}: {exc}")
    except ValueError as exc:
        return ExpansionOutcome(family, (), error=f"{type(exc).__name__}: {exc}")


def expand_many(
    client: LLMClient,
    family: str,
    questions: Sequence[str],
    options: LLMOptions = LLMOptions(),
    cache: LLMCache | None = None,
    *,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    on_outcome: Callable[[int, ExpansionOutcome], None] | None = None,
) -> list[ExpansionOutcome]:
    """Expand every question (``limit`` requests in flight, default the client's concurrency),
    one outcome per question in input order. Questions not started when ``cancel`` is set come
    back with ``cancelled=True``. After a request failed in a way every other would too (the
    endpoint unreachable or hanging, the key refused, the model unknown...: see
    :mod:`services.llm.breaker`) the questions not sent yet come back failed with ``sent=False``
    (``error`` names the first failure), without a request each; one already sent and waiting to retry then
    stops waiting and comes back failed but sent (:func:`expand_one`). ``on_outcome(index, outcome)`` is
    called from the calling thread as each question's request answers (or its cache hit comes back), before
    ``progress``: what was asked so far is known even if ``progress`` raises (Streamlit's Stop) or the
    process dies before this function returns."""
    breaker = Breaker(cancel)

    def reached(o: Outcome[ExpansionOutcome]) -> None:
        if on_outcome is not None and o.ok and o.value is not None:
            on_outcome(o.index, o.value)

    outcomes = run_concurrent(list(questions), lambda q: expand_one(client, family, q, options, cache, breaker),
                              limit=limit or client.config.concurrency, progress=progress, cancel=breaker,
                              on_result=reached)
    out: list[ExpansionOutcome] = []
    for o in outcomes:
        if o.cancelled and not breaker.cancelled and breaker.tripped:
            out.append(ExpansionOutcome(family, (), error=breaker.not_sent(), sent=False))
        elif o.cancelled:
            out.append(ExpansionOutcome(family, (), error="cancelled", cancelled=True))
        elif not o.ok or o.value is None:  # expand_one does not raise; kept for safety
            out.append(ExpansionOutcome(family, (), error=o.error or "failed"))
        else:
            out.append(o.value)
    return out
