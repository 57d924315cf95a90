"""The LLM expansions of an evaluation run (:func:`services.workflows.evaluation_runs.run_evaluation`):
asking them through the store's LLM cache (:func:`expand_queries`), the queries whose expansion failed (redone on
resume) and the run's ``llm_usage`` (:func:`usage_of_session`, :func:`add_usage`). No Streamlit here.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Sequence

import db
from mrag_core.evaluation import EvaluationCancelled
from mrag_core.llm_strategies import (
    LLMOptions,
    cost_summary,
)
from services.llm.config import LLMConfig
from services.llm_strategies import ExpansionOutcome, expand_many


def llm_failed_queries(store: db.Store, run_id: int, strategy: str) -> set[int]:
    """Queries of ``strategy`` whose stored result marks a failed LLM expansion (redone on resume)."""
    return {r.query_id for r in db.load_eval_results(store, run_id, strategy)
            if isinstance(r.details, dict) and isinstance(r.details.get("llm"), dict) and r.details["llm"].get("error")}


def expand_queries(cfg: LLMConfig, store: db.Store, families: Sequence[str], wanted: dict[str, list[db.QueryRow]],
                    options: LLMOptions, stage: Callable[[str], Any], cancel: threading.Event | None,
                    out: dict[tuple[str, int], ExpansionOutcome], answered: Callable[[], None] | None = None,
                    stopped: dict[str, int] | None = None) -> None:
    """Expansions of the ``wanted`` queries per family, through the store's LLM cache, into ``out`` keyed
    ``(family, query id)``: each as its request answers (then ``answered()`` is called, from this thread), so a
    Stop or a failure halfway through a family keeps the costs of what was asked; at a family's end its
    questions left unsent after the endpoint failed too. Into ``stopped`` (family -> count), also when the
    family is left by an exception: the questions whose request failed and whose retry wait ``cancel`` ended
    (:attr:`~services.llm.client.LLMClient.cancelled_after_failure`; they have no outcome in ``out`` and stay
    to do). Raises :class:`EvaluationCancelled` when ``cancel`` is set meanwhile."""
    from services.llm.client import LLMClient
    from services.workflows.llm_cache import StoreLLMCache

    cache = StoreLLMCache(store)
    with LLMClient(cfg) as client:
        for fam in families:
            qs = wanted.get(fam, [])
            if not qs:
                continue
            def keep(i: int, outcome: ExpansionOutcome, fam: str = fam, qs: list[db.QueryRow] = qs) -> None:
                out[(fam, qs[i].id)] = outcome
                if answered is not None:
                    answered()

            before = client.cancelled_after_failure
            try:
                outcomes = expand_many(client, fam, [q.text for q in qs], options, cache,
                                       progress=stage(f"LLM {fam}"), cancel=cancel, on_outcome=keep)
            finally:
                if stopped is not None and client.cancelled_after_failure > before:
                    stopped[fam] = stopped.get(fam, 0) + client.cancelled_after_failure - before
            out.update({(fam, q.id): o for q, o in zip(qs, outcomes) if not o.cancelled})
            if cancel is not None and cancel.is_set():
                raise EvaluationCancelled(f"cancelled during the {fam} expansions")


def add_usage(prior: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Numbers of ``new`` added to those of ``prior`` (nested dicts added key by key); the rest replaced."""
    out = dict(prior)
    for key, value in new.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = add_usage(old, value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(old, (int, float)):
            out[key] = old + value
        else:
            out[key] = value
    return out


STOPPED_IN_RETRY_WAIT = "sent and failed, then stopped while waiting to retry; asked again on resume"
"""The ``error`` of the usage record of an expansion whose request failed and whose retry wait the user's Stop
ended (:func:`_stopped_records`)."""


def _stopped_records(stopped: Mapping[str, int]) -> list[dict[str, Any]]:
    """One expansion record per request of ``stopped`` (family -> count) that failed and whose retry wait the
    user's Stop ended: no text, 0 tokens, 0 s, not cached, ``error`` :data:`STOPPED_IN_RETRY_WAIT`. So
    :func:`cost_summary` counts each as one request and one failure (the question itself stays to do: it has no
    result, and a resume asks it again, a request of its own)."""
    return [ExpansionOutcome(fam, (), error=STOPPED_IN_RETRY_WAIT).record()
            for fam, n in stopped.items() for _ in range(n)]


def usage_of_session(expanded: dict[tuple[str, int], ExpansionOutcome], cfg: LLMConfig | None,
                      stopped: Mapping[str, int] | None = None) -> dict[str, Any]:
    """``llm_usage`` of this session: per family :func:`cost_summary` plus the totals (``total``), over the
    ``expanded`` outcomes and the requests ``stopped`` in a retry wait (:func:`_stopped_records`)."""
    records = [(f, o.record()) for (f, _), o in expanded.items()]
    records += [(r["family"], r) for r in _stopped_records(stopped or {})]
    if not records:
        return {}
    per_family = {fam: cost_summary(r for f, r in records if f == fam) for fam in dict.fromkeys(f for f, _ in records)}
    usage: dict[str, Any] = {"families": per_family, "total": cost_summary(r for _, r in records)}
    if cfg is not None:
        usage["model"] = cfg.model
    return usage
