"""The LLM annotator of a pre-annotation run (:func:`services.workflows.annotation.preannotate`), and what it tells
the run's summary: why the endpoint stopped the run (the cause of the error that tripped its breaker), and notes on
how the run adapted to the endpoint (JSON-schema output refused, concurrency lowered after timeouts, answers asked
again). One annotator per run: its breaker, concurrency and counts span the run's batches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mrag_core.wording import counted
from services.annotate import AnnotationDoc, CategorySpec, Suggestion, annotate_documents, llm_identity
from services.annotate.llm_annotator import Activity, RunStats
from services.llm.adaptive import AdaptiveLimit
from services.llm.breaker import Breaker
from services.llm.cache import LLMCache
from services.llm.causes import tag
from services.llm.client import LLMClient

__all__ = ["LLMAnnotator", "run_notes"]

ProgressFn = Callable[[int, int], None]
SuggestionFn = Callable[[Suggestion], None]
ActivityFn = Callable[[Activity], None]


def run_notes(unsupported: dict[str, str], limiter: AdaptiveLimit | None, stats: RunStats | None) -> list[str]:
    """Plain-words notes on how a run adapted to its endpoint: the optional request parts it refused
    (``unsupported``, :attr:`LLMClient.unsupported`), the concurrency lowered after timeouts, answers asked again."""
    notes = []
    if "json_schema" in unsupported:
        fallback = "as plain text" if "json_object" in unsupported else "as plain JSON"
        notes.append(f"The endpoint refused JSON-schema output ({unsupported['json_schema']}): answers were asked "
                     f"for {fallback}, and their labels checked against the categories here.")
    elif "json_object" in unsupported:
        notes.append(f"The endpoint refused JSON mode ({unsupported['json_object']}): answers were asked for as "
                     "plain text, and their labels checked against the categories here.")
    if "logprobs" in unsupported:
        notes.append(f"The endpoint refused token log-probabilities ({unsupported['logprobs']}): scores are the "
                     "model's own confidence.")
    if limiter is not None and limiter.lowest < limiter.maximum:
        notes.append(f"Requests in flight lowered from {limiter.maximum} to {limiter.lowest} after "
                     f"{counted(limiter.timeouts, 'timeout')} (MRAG_LLM_CONCURRENCY {limiter.maximum}; "
                     f"{limiter.limit} at the end).")
    if stats is not None and stats.reasked:
        notes.append(f"{counted(stats.reasked, 'unusable answer')} asked again with a changed prompt and "
                     f"temperature: {stats.fixed} named a category then.")
    return notes


@dataclass
class LLMAnnotator:
    """Annotator backed by an OpenAI-compatible chat model (``annotate_documents``)."""

    client: LLMClient
    cache: LLMCache | None = None
    concurrency: int | None = None
    agent: str = field(init=False)
    model_version: str = field(init=False)

    _breaker: Breaker | None = field(default=None, init=False, repr=False)
    _limiter: AdaptiveLimit = field(init=False, repr=False)
    _stats: RunStats = field(default_factory=RunStats, init=False, repr=False)

    def __post_init__(self) -> None:
        self.agent, self.model_version = llm_identity(self.client.config.model)
        self._limiter = AdaptiveLimit(self.concurrency or self.client.config.concurrency)

    def annotate(
        self, docs: Sequence[AnnotationDoc], categories: Sequence[CategorySpec], *, cancel: threading.Event | None,
        progress: ProgressFn | None = None, on_suggestion: SuggestionFn | None = None,
        activity: ActivityFn | None = None,
    ) -> list[Suggestion]:
        """The batch's requests in parallel; ``on_suggestion`` then ``progress`` after each answer, ``activity``
        while it waits. One breaker, one adaptive concurrency and one count for all of this annotator's batches:
        once the endpoint failed for good (:mod:`services.llm.breaker`), later batches send nothing (their
        documents stay to do, as after a cancel); a concurrency lowered after timeouts stays lowered."""
        if self._breaker is None:
            self._breaker = Breaker(cancel)
        return annotate_documents(self.client, docs, categories, cancel=cancel, cache=self.cache, progress=progress,
                                  breaker=self._breaker, on_suggestion=on_suggestion, limiter=self._limiter,
                                  stats=self._stats, activity=activity)

    def stopped_by(self) -> tuple[str | None, str] | None:
        """``(cause, error)`` of the failure that stopped the run (the endpoint failed in a way every request
        would: the breaker tripped), the error tagged with its cause; None while nothing did."""
        if self._breaker is None or self._breaker.error is None:
            return None
        cause, error = self._breaker.cause, self._breaker.error
        return cause, tag(cause, error) if cause is not None else error

    def notes(self) -> list[str]:
        """:func:`run_notes` of this annotator's run so far."""
        return run_notes(self.client.unsupported, self._limiter, self._stats)

    def close(self) -> None:
        """Close the client's connections (after the run)."""
        self.client.close()
