"""Evaluation runs joined with the store: run (resumable, cancellable), load, summarise, compare.

:func:`run_evaluation` scores retrieval strategies on a stored query set of a stored corpus and
writes every (strategy, query) result - the retrieved document ids (database ids, length
``k_max``) and the RSR / CSR for every k = 1..k_max - into ``db`` in batches, each batch in its
own transaction. A run records its full configuration, seed and timings. Resuming (same call
with ``run_id``) skips the queries ``db.completed_queries`` already lists per strategy, so a
cancel or a crash loses at most one batch.

A run records the fingerprint of each query it scored (:func:`query_fingerprint`, ``config["queries"]``), so
that the views name the queries edited after it (:func:`edited_note`). A resume scores the query set as it is
when the resume starts: a query edited since the run scored it (:func:`edited_since`) is scored again for every
strategy, and each batch stores its results together with the fingerprints of the versions it scored, in one
transaction that also drops the query's older results of the other strategies (:func:`db.save_eval_results`).
So every stored result is of the version its fingerprint names, a stop at any point keeps that true, and the
edited note of a run that was resumed names only the queries edited after that resume. (Refusing the resume
instead would leave a stopped run that can never be finished once one of its queries is corrected.) A finished
(``done``) run is never resumed (:func:`finished_run_message`): it is the record analysts compare against, so a
query edited after it finished leaves its results as they are, and a new run scores the query set as it is now.

Vectors: a finished, up-to-date embedding run of (corpus, model, layer, pooling) is used when
there is one (:func:`services.workflows.indexing.load_corpus_index`, its stored head importance
reused); a stale or unfinished one is first updated (only documents without vectors of their
current text are embedded); with no run at all the documents (ordered by database id) are embedded
through the on-disk cache (:func:`mrag_core.embedding_cache.cached_embed`) and indexed here.

Which queries are scored: status ``ok`` or ``flagged``, with text and at least one ground-truth
document. Fusion strategies use each query's stored sub-queries; a query without any is searched
with its own text as the only sub-query (``details.fusion_fallback`` marks it).

LLM strategies (Multi-Query, HyDE, intent queries; :mod:`mrag_core.llm_strategies`) expand each
query through the configured endpoint, cached in the store (a rerun or a resume sends no request
for a query already expanded); all expansion texts are embedded in one batched pass. Per result,
``details.llm`` holds the texts, tokens, latency and cache hit of its expansion (``error`` and
``fallback`` when it failed: the query is then searched with its own text); per run,
``llm_usage`` holds the totals per family and overall (:func:`~mrag_core.llm_strategies.cost_summary`).

Labels: a document's effective label, ``(unlabeled)`` when it has none (as the index loader does).

While a run executes, this process knows it (:func:`active_runs`): :func:`stop_runs` stops the runs that check
one cancel event and waits until they have stored ``cancelled``. Every process stores a heartbeat with the run it
works on (:mod:`db.liveness`, :class:`~services.heartbeat.Heartbeat`): a resume of a run whose heartbeat is fresh
is refused, and :func:`status_label` tells a run stored as ``running`` that runs here, that runs elsewhere (the
CLI beside the app) and that no longer runs (``interrupted``) apart. A layer sweep records all its layers, so
:func:`resume_sweep` finishes the ones a stop left out (:func:`sweep_plans`).
No Streamlit here.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Iterator, Mapping, Sequence

import pandas as pd

import db
from mrag_core.corpus_index import CorpusIndex
from mrag_core.embedding_cache import cached_embed
from mrag_core.evaluation import (
    EvaluationCancelled,
    EvaluationResult,
    QueryCase,
    StrategyResult,
    authors_file_layout,
    authors_layout,
    evaluate,
    plotter_layout,
)
from mrag_core.evaluation import plotter_notes as result_plotter_notes
from mrag_core.extraction import ExtractionCancelled
from mrag_core.llm_strategies import (
    LLM_FAMILIES,
    LLMOptions,
    TextBatch,
    cost_summary,
    families_for,
    family_of,
    is_llm_strategy,
)
from mrag_core.metrics.weighted import weighted_success_ratio
from mrag_core.sentence_round_robin import query_part_rows
from mrag_core.settings import DEFAULT_C, DEFAULT_MODEL, DEFAULT_W, VARIANTS, RetrievalSettings
from mrag_core.significance import holm_adjust, paired_test, significance_mark
from mrag_core.strategy_registry import STRATEGIES, Strategy, UnknownStrategyError, label_of, resolve_all
from services.heartbeat import Heartbeat
from services.llm.config import LLMConfig, LLMConfigError, no_endpoint_message
from services.llm_strategies import ExpansionOutcome, expand_many
from services.workflows import indexing

ProgressFn = Callable[[str, int, int], None]
UNLABELED = "(unlabeled)"
DEFAULT_BATCH = 64

__all__ = [
    "DrillDown",
    "EvaluationInputError",
    "RunMetrics",
    "SweepPlan",
    "active_runs",
    "accuracy_and_cost",
    "items_cost",
    "llm_cost",
    "llm_cost_total",
    "once_each_cost",
    "runs_llm_tokens",
    "cost_row",
    "shared_with",
    "llm_total_note",
    "shared_expansions_note",
    "sharing_expansions",
    "authors_json",
    "plotter_json",
    "plotter_notes",
    "compare_runs",
    "drilldown",
    "coverage_note",
    "edited_note",
    "edited_since",
    "evaluable_queries",
    "layer_sweep",
    "layer_sweep_frame",
    "fused_depth_note",
    "load_run_metrics",
    "means_table",
    "relative_improvement",
    "finished_run_message",
    "resume_evaluation",
    "resume_sweep",
    "sweep_plans",
    "run_csv",
    "run_evaluation",
    "signed",
    "single_aspect_table",
    "status_label",
    "stop_runs",
    "to_evaluation_result",
    "validate_request",
]


class EvaluationInputError(ValueError):
    """The evaluation request cannot run (unknown corpus/query set/strategy, bad numbers, no queries)."""


# --------------------------------------------------------------------------- runs in progress in this process

_ACTIVE: dict[int, threading.Event] = {}  # run id -> the cancel event it checks, while it runs in this process
_ACTIVE_CHANGED = threading.Condition()


def _claim(run_id: int, cancel: threading.Event) -> None:
    """Record that ``run_id`` runs in this process, stopped by ``cancel``. Raises :class:`EvaluationInputError`
    when it already runs here (a second Resume while the first still works)."""
    with _ACTIVE_CHANGED:
        if run_id in _ACTIVE:
            raise EvaluationInputError(f"evaluation run {run_id} is already running")
        _ACTIVE[run_id] = cancel


def _release(run_id: int) -> None:
    with _ACTIVE_CHANGED:
        _ACTIVE.pop(run_id, None)
        _ACTIVE_CHANGED.notify_all()


def active_runs() -> set[int]:
    """Ids of the evaluation runs executing in this process now."""
    with _ACTIVE_CHANGED:
        return set(_ACTIVE)


def stop_runs(cancel: threading.Event, timeout: float = 60.0) -> list[int]:
    """Stop the runs of this process that check ``cancel`` and wait (up to ``timeout`` seconds) until they have
    stored their state; returns the ids of the runs that were stopped.

    A page's Stop click reruns the page while the run still works in the page's previous script run, which stops
    only at its next progress report: without waiting, the rerun listed the run as ``running``. Runs that check
    another event (another session's) are left alone."""
    with _ACTIVE_CHANGED:
        mine = [rid for rid, event in _ACTIVE.items() if event is cancel]
        if not mine:
            return []
        cancel.set()
        _ACTIVE_CHANGED.wait_for(lambda: not any(event is cancel for event in _ACTIVE.values()), timeout=timeout)
    return mine


STATUS_WORDS = {"done": "done", "cancelled": "stopped", "failed": "failed"}


def status_label(run: db.EvalRunInfo) -> str:
    """A run's status as the user should read it: ``stopped`` for a cancelled run, and for one stored as
    ``running``: ``running`` while it executes in this process, ``running elsewhere`` while another process
    (the CLI, another server on the same database) keeps its heartbeat fresh (:func:`db.is_live`), else
    ``interrupted`` (its process ended without storing that: a server restart, a killed CLI)."""
    if run.status == "running":
        if run.id in active_runs():
            return "running"
        return "running elsewhere" if run.live else "interrupted"
    return STATUS_WORDS.get(run.status, run.status)


# --------------------------------------------------------------------------- running


def apply_variant(strategies: Sequence[str], variant: str) -> list[str]:
    """The strategies as ids (an alias such as ``recommended`` becomes its id, :mod:`mrag_core.strategy_registry`),
    with the MRAG voting ``variant`` applied to plain ``mrag``: ``decay`` -> ``mrag-decay``,
    ``distance`` -> ``mrag-distance`` (``importance`` keeps ``mrag``). Order kept, duplicates dropped."""
    if variant not in VARIANTS:
        raise EvaluationInputError(f"unknown voting variant {variant!r}: use one of {', '.join(VARIANTS)}")
    try:
        ids = [sp.id for sp in resolve_all(strategies)]
    except UnknownStrategyError as exc:
        raise EvaluationInputError(str(exc)) from None
    out: list[str] = []
    for s in ids:
        name = f"mrag-{variant}" if s == "mrag" and variant != "importance" else s
        if name not in out:
            out.append(name)
    return out


def evaluable_queries(store: db.Store, query_set_id: int) -> list[db.QueryRow]:
    """Queries that can be scored: status ok/flagged, non-empty text and ground truth."""
    return [q for q in db.list_queries(store, query_set_id)
            if q.status in ("ok", "flagged") and q.text.strip() and q.ground_truth]


def query_fingerprint(query: db.QueryRow) -> str:
    """``"<n_aspects>:<hash>"``: a query as a run scores it (aspect count; hash of its text and ground truth).
    A run stores one per scored query (``config["queries"]``), so that a query edited after the run is told
    apart (:attr:`RunMetrics.edited`) and grouped by the aspect count it was scored with."""
    digest = hashlib.sha256(json.dumps([query.text, sorted(query.ground_truth)]).encode()).hexdigest()[:12]
    return f"{query.n_aspects}:{digest}"


def edited_since(run: db.EvalRunInfo, queries: Sequence[db.QueryRow]) -> set[int]:
    """Ids of ``queries`` that the run scored from another version (its recorded fingerprint differs from
    :func:`query_fingerprint` of the query as it is now); none for a run stored before fingerprints were kept."""
    saved = db.query_fingerprints(run.config)
    return {q.id for q in queries if str(q.id) in saved and saved[str(q.id)] != query_fingerprint(q)}


def _check_request(store: db.Store, corpus_id: int, query_set_id: int, strategies: Sequence[str],
                   c: int, k_max: int, w: float) -> tuple[db.CorpusInfo, db.QuerySetInfo]:
    try:
        corpus = db.get_corpus(store, corpus_id)
    except db.NotFoundError as exc:
        raise EvaluationInputError(f"corpus {corpus_id} does not exist") from exc
    try:
        qs = db.get_query_set(store, query_set_id)
    except db.NotFoundError as exc:
        raise EvaluationInputError(f"query set {query_set_id} does not exist") from exc
    if qs.corpus_id != corpus_id:
        raise EvaluationInputError(f"query set {qs.name!r} belongs to another corpus")
    if not strategies:
        raise EvaluationInputError("choose at least one strategy")
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise EvaluationInputError(f"unknown strategies {unknown}: use {', '.join(STRATEGIES)}")
    if c < 1 or k_max < 1:
        raise EvaluationInputError(f"c and k_max must be at least 1 (got c={c}, k_max={k_max})")
    if w < 0:
        raise EvaluationInputError(f"the weight w must be non-negative (got {w})")
    if corpus.n_documents < 2:
        raise EvaluationInputError(f"corpus {corpus.name!r} has {corpus.n_documents} document(s); "
                                   "at least 2 are needed")
    if k_max > corpus.n_documents:
        raise EvaluationInputError(
            f"k_max ({k_max}) exceeds the number of documents in {corpus.name!r} ({corpus.n_documents})")
    return corpus, qs




def _endpoint_for(strategies: Sequence[str], llm_config: LLMConfig | None) -> LLMConfig | None:
    """The endpoint the LLM strategies among ``strategies`` will use (``llm_config``, else the
    environment's); ``None`` when none is requested. Raises :class:`EvaluationInputError` when
    they are requested and no usable endpoint is configured."""
    names = [s for s in strategies if is_llm_strategy(s)]
    if not names:
        return None
    cfg = llm_config
    if cfg is None:
        try:
            cfg = LLMConfig.from_env()
        except LLMConfigError as exc:
            raise EvaluationInputError(f"the LLM endpoint settings are unusable: {exc}") from exc
    if cfg is None:
        need = "needs" if len(names) == 1 else "need"
        raise EvaluationInputError(no_endpoint_message(f"{', '.join(names)} {need}")
                                   + ", or [llm] in .streamlit/secrets.toml")
    return cfg


def check_llm_options(options: LLMOptions) -> None:
    """Raise :class:`EvaluationInputError` for out-of-range LLM options (rewrites 1..10, answers 1..8)."""
    from services.expansion.intent import MAX_ANSWERS
    from services.expansion.multi_query import MAX_REWRITES

    if not 1 <= options.n_rewrites <= MAX_REWRITES:
        raise EvaluationInputError(f"the number of rewrites must be between 1 and {MAX_REWRITES} "
                                   f"(got {options.n_rewrites})")
    if not 1 <= options.n_answers <= MAX_ANSWERS:
        raise EvaluationInputError(
            f"the number of intent answers must be between 1 and {MAX_ANSWERS} (got {options.n_answers})")


def validate_request(store: db.Store, *, corpus_id: int, query_set_id: int,
                     settings: RetrievalSettings = RetrievalSettings(),
                     llm_config: LLMConfig | None = None, llm_options: LLMOptions | None = None) -> list[str]:
    """Check a request (its ``settings``: strategies, c, k_max, variant, w) without running it (before loading a
    model); returns the strategies as ids with the variant applied. LLM strategies need ``llm_config`` or an
    endpoint in the environment. Raises :class:`EvaluationInputError` with a one-line reason."""
    final = apply_variant(list(settings.strategies), settings.variant)
    _check_request(store, corpus_id, query_set_id, final, settings.c, settings.k_max, settings.w)
    if families_for(final):
        check_llm_options(llm_options or LLMOptions())
    _endpoint_for(final, llm_config)
    if not evaluable_queries(store, query_set_id):
        raise EvaluationInputError("the query set has no query with text and ground truth to evaluate")
    return final


@dataclass
class _Prepared:
    index: CorpusIndex
    doc_ids: list[int]
    labels: list[str]
    embedding_run_id: int | None
    timing: dict[str, float]


def _prepare_index(store: db.Store, corpus_id: int, lm: Any, layer: int, seed: int, embedding_run_id: int | None,
                   stage: Callable[[str], Any], cancel: threading.Event | None,
                   batch_size: int) -> tuple[_Prepared, Any]:
    """The stored corpus index the run searches, and the model to embed queries with.

    ``embedding_run_id`` names it; otherwise the finished, current index of (model, layer, pooling) is used,
    and when there is none (never built, unfinished, or stale after the corpus changed) it is built or updated
    first through :func:`~services.workflows.indexing.build_embedding_run` and kept: only documents without
    vectors of their current text are embedded (after an import of 10 documents into 10,000, the 10), an
    interrupted build resumes, and Compare, Maps and later runs find the index. ``seed`` samples the head
    importance pairs (seed 0: the importance stored with the index). Raises ExtractionCancelled
    when ``cancel`` stops the build (its saved vectors stay)."""
    timing: dict[str, float] = {}
    t0 = time.perf_counter()
    if embedding_run_id is not None:
        run = db.get_embedding_run(store, embedding_run_id)
    else:  # build_embedding_run returns a current index as it is, and builds, resumes or updates any other
        on_docs = stage("documents")
        try:
            built = indexing.build_embedding_run(
                store, corpus_id, lm, layer=layer, pooling=lm.head_pooling, batch_size=batch_size,
                progress=(lambda done, total, _eta: on_docs(done, total)) if on_docs else None, cancel=cancel)
        except db.RunInProgressError as exc:  # the CLI (or another server) builds this index now
            raise EvaluationInputError(f"The index this run searches is not ready: {exc}") from exc
        if built.status != "done":
            raise ExtractionCancelled(f"index build cancelled after {built.run.n_saved} of "
                                      f"{built.run.n_docs} documents")
        run = built.run
        if not built.reused:
            timing["embed_documents"] = time.perf_counter() - t0
            t0 = time.perf_counter()
    bundle = indexing.load_corpus_index(store, run.id, indexing.serving_backend(store, run), seed=seed)
    qlm = indexing.model_for_run(lm, run)
    timing["load_index"] = time.perf_counter() - t0
    return _Prepared(bundle.index, list(bundle.doc_ids), list(bundle.labels), run.id, timing), qlm


def topic_units(sources: Sequence[str], labels: Sequence[str]) -> list[int] | None:
    """Scoring units per index row for topic-level scoring (the MRAG legal / accident layout).

    Documents imported from that layout name their topic in ``source``; the documents of one
    (category, topic) share a unit, every other document is its own unit, so RSR counts topics
    found: |units(R_k) ∩ units(G)| / |units(G)|. ``None`` (document-level scoring) when no
    document has a topic.
    """
    from services.ingest.benchmarks import topic_of_source

    topics = [topic_of_source(s) for s in sources]
    if not any(topics):
        return None
    ids: dict[tuple[str, str], int] = {}
    units: list[int] = []
    for row, (topic, label) in enumerate(zip(topics, labels)):
        if topic:
            units.append(ids.setdefault((label, topic), len(sources) + len(ids)))
        else:
            units.append(row)
    return units


def _load_model(model_name: str, lm: Any | None) -> Any:
    if lm is not None:
        return lm
    from mrag_core.models.loader import ModelLoadError, load_model

    try:
        return load_model(model_name)
    except ModelLoadError as exc:
        raise EvaluationInputError(str(exc)) from exc


def _llm_failed_queries(store: db.Store, run_id: int, strategy: str) -> set[int]:
    """Queries of ``strategy`` whose stored result marks a failed LLM expansion (redone on resume)."""
    return {r.query_id for r in db.load_eval_results(store, run_id, strategy)
            if isinstance(r.details, dict) and isinstance(r.details.get("llm"), dict) and r.details["llm"].get("error")}


def _expand_queries(cfg: LLMConfig, store: db.Store, families: Sequence[str], wanted: dict[str, list[db.QueryRow]],
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


USAGE_EVERY_S = 5.0  # while expanding, a run's LLM usage so far is stored at most this often (seconds)


def _add_usage(prior: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Numbers of ``new`` added to those of ``prior`` (nested dicts added key by key); the rest replaced."""
    out = dict(prior)
    for key, value in new.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = _add_usage(old, value)
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


def _usage_of_session(expanded: dict[tuple[str, int], ExpansionOutcome], cfg: LLMConfig | None,
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


def run_evaluation(
    store: db.Store,
    *,
    corpus_id: int,
    query_set_id: int,
    settings: RetrievalSettings = RetrievalSettings(),
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    run_id: int | None = None,
    lm: Any | None = None,
    name: str = "",
    embedding_run_id: int | None = None,
    batch_size: int = DEFAULT_BATCH,
    extra_config: dict[str, Any] | None = None,
    llm_config: LLMConfig | None = None,
    llm_options: LLMOptions | None = None,
) -> int:
    """Create (or, with ``run_id``, resume) an evaluation run and score it; returns the run id.

    ``settings``: model, layer, strategies (ids or aliases, stored as ids), c, k_max, voting variant, w and seed
    (:class:`~mrag_core.settings.RetrievalSettings`; its ``pooling`` and ``backend`` are not used: the model's pooling
    is, and a run searches exactly). With ``run_id`` the stored configuration is used and the other settings are
    ignored; the missing results
    are scored, and those of queries edited since the run scored them (:func:`edited_since`) are scored again.
    The resume scores the query set as it is when it starts: ``config["n_queries"]`` becomes its number of
    evaluable queries (those added since the run began count) when the resume claims the run, and in the same
    transaction the results of queries no longer evaluable (text or ground truth removed, status failed) are
    dropped, so the run never holds more results than it expects.
    ``progress(stage, done, total)`` with stage ``documents`` / ``queries`` / ``LLM <family>`` /
    ``sub-queries`` / ``expansions`` / ``evaluation``; ``cancel`` (checked between batches) leaves
    the run ``cancelled`` and resumable. ``lm`` is an already loaded model (else ``model_name`` is
    loaded). Bad input raises :class:`EvaluationInputError` before anything is written.

    LLM strategies (``multi-query``, ``hyde``, ``intent`` and ``-mrag`` forms) need an endpoint:
    ``llm_config``, else the environment's (:meth:`LLMConfig.from_env`); ``llm_options`` (default
    :class:`LLMOptions`) is stored in ``config["llm"]``. Answers are cached in the store, so a rerun
    or resume sends no request for a question already expanded. Every such result's
    ``details["llm"]`` records the expansion texts, its tokens, latency and cache hit; an unusable
    answer or a failed request for one query is recorded there as ``error`` and that query is
    searched with its own text as the only sub-query (counted in ``llm_usage`` as ``failed``,
    redone on resume). Run totals (this session's added to earlier sessions') are in ``llm_usage``; a request
    that failed and whose retry wait a Stop ended counts there as a request and a failure (its query has no result
    and is asked again on resume). ``timing["llm_expansions_s"]``, like the other session seconds
    (:data:`SESSION_SECONDS`), adds up the run's sessions, one stopped during the expansions included.
    """
    model_name, layer, variant = settings.model, settings.layer, settings.variant
    c, k_max, w, seed = settings.c, settings.k_max, settings.w, settings.seed
    strategies: Sequence[str] = settings.strategies
    if run_id is not None:
        try:
            info = db.get_eval_run(store, run_id)
        except db.NotFoundError as exc:
            raise EvaluationInputError(f"evaluation run {run_id} does not exist") from exc
        if info.status == "done":
            raise EvaluationInputError(finished_run_message(info))
        cfg = info.config
        corpus_id, query_set_id = info.corpus_id, info.query_set_id
        stored = RetrievalSettings.from_dict(cfg, seed=int(info.seed or 0))
        model_name, layer, strategies = stored.model, stored.layer, list(stored.strategies)
        c, k_max, w, seed = stored.c, stored.k_max, stored.w, stored.seed
        embedding_run_id = cfg.get("embedding_run_id") or embedding_run_id
        llm_options = LLMOptions.from_dict(cfg.get("llm"))
        _check_request(store, corpus_id, query_set_id, strategies, c, k_max, w)
    else:
        strategies = apply_variant(list(strategies), variant)
        corpus, _ = _check_request(store, corpus_id, query_set_id, strategies, c, k_max, w)
    options = llm_options or LLMOptions()
    families = families_for(strategies)
    if families:
        check_llm_options(options)
    endpoint = _endpoint_for(strategies, llm_config)
    queries = evaluable_queries(store, query_set_id)
    if not queries:
        raise EvaluationInputError("the query set has no query with text and ground truth to evaluate")
    lm = _load_model(model_name, lm)
    try:
        layer_idx = lm.layer_index(layer)
    except ValueError as exc:
        raise EvaluationInputError(str(exc)) from exc

    cancel = cancel if cancel is not None else threading.Event()
    if run_id is None:
        n_docs = db.get_corpus(store, corpus_id).n_documents
        config = {
            "model": model_name, "layer": layer_idx, "layer_requested": layer, "pooling": lm.head_pooling,
            "strategies": list(strategies), "variant": variant, "c": min(c, n_docs), "c_requested": c,
            "k_max": k_max, "w": w, "n_queries": len(queries), "corpus_version": corpus.version,
            "queries": {str(q.id): query_fingerprint(q) for q in queries},
            **({"llm": {"model": endpoint.model, **options.to_dict()}} if endpoint is not None else {}),
            **(extra_config or {}),
        }
    owner = db.new_owner()  # this claim: stored with the run, beaten while it works (db.liveness)
    if run_id is None:
        info = db.create_eval_run(store, corpus_id=corpus_id, query_set_id=query_set_id,
                                  embedding_run_id=embedding_run_id, config=config, seed=seed, owner=owner,
                                  name=name or f"{model_name} L{layer_idx}: {', '.join(strategies)}")
        run_id = info.id
        c = config["c"]
        _claim(run_id, cancel)
    else:
        _claim(run_id, cancel)
        try:
            db.claim_eval_run(store, run_id, owner, unfinished_only=True, query_ids=[q.id for q in queries])
        except db.RunInProgressError as exc:  # the CLI (or another server) works on it now
            _release(run_id)
            raise EvaluationInputError(str(exc)) from exc
        except db.InvalidInputError as exc:  # it finished since it was read above
            _release(run_id)
            raise EvaluationInputError(finished_run_message(info)) from exc
        except BaseException:
            _release(run_id)
            raise
    claimed = run_id
    try:
        with Heartbeat(lambda: db.beat_eval_run(store, claimed, owner), db.BEAT_EVERY_S, on_lost=cancel.set):
            return _score_run(store, run_id, corpus_id=corpus_id, queries=queries, lm=lm,
                              layer_idx=layer_idx, strategies=strategies, c=c, k_max=k_max, seed=seed,
                              embedding_run_id=embedding_run_id, options=options, endpoint=endpoint,
                              progress=progress, cancel=cancel, batch_size=batch_size, owner=owner)
    finally:
        _release(run_id)


def _score_run(store: db.Store, run_id: int, *, corpus_id: int, queries: list[db.QueryRow],
               lm: Any, layer_idx: int, strategies: list[str], c: int, k_max: int, seed: int,
               embedding_run_id: int | None, options: LLMOptions, endpoint: LLMConfig | None,
               progress: ProgressFn | None, cancel: threading.Event, batch_size: int, owner: str) -> int:
    """Score the missing (strategy, query) results of the claimed run ``run_id`` and store its final status
    (:func:`run_evaluation`'s body once the run exists); ``owner``: the claim, so that a run another process
    took over meanwhile keeps that process's status."""
    families = families_for(strategies)
    prior_info = db.get_eval_run(store, run_id)
    prior, prior_usage = prior_info.timing, prior_info.llm_usage
    t_start = time.perf_counter()
    timing: dict[str, Any] = {}
    expanded: dict[tuple[str, int], ExpansionOutcome] = {}
    stopped: dict[str, int] = {}  # per family: requests that failed, then the user's Stop ended their retry wait
    eval_s: dict[str, float] = {}  # search + scoring seconds per strategy in this session (kept when stopped too)

    def stopped_timing() -> dict[str, Any]:
        """``timing`` for a run that stops here: what it spent searching so far and its seconds in all (``total_s``),
        each added to earlier sessions'. A stopped session's seconds count in the run's total as a finished one's."""
        spent = {**_with_prior_sessions(prior, timing),
                 "total_s": float(prior.get("total_s", 0.0)) + time.perf_counter() - t_start}
        return {**spent, "evaluate": _added_seconds(prior.get("evaluate"), eval_s)} if eval_s else spent

    def stage(label: str) -> Callable[[int, int], None] | None:
        return (lambda done, total: progress(label, done, total)) if progress else None

    def usage() -> dict[str, Any] | None:
        session = _usage_of_session(expanded, endpoint, stopped)
        return _add_usage(prior_usage, session) if session else None

    usage_saved = [time.monotonic()]

    def save_usage() -> None:
        """Store the usage so far every :data:`USAGE_EVERY_S` while expanding: a session that dies without
        ending (killed, power lost) leaves its sent calls counted, not only those of the sessions that ended."""
        if time.monotonic() - usage_saved[0] >= USAGE_EVERY_S:
            db.record_eval_usage(store, run_id, usage() or {}, owner=owner)
            usage_saved[0] = time.monotonic()

    try:
        prepared, qlm = _prepare_index(store, corpus_id, lm, layer_idx, seed, embedding_run_id, stage, cancel,
                                       batch_size=16)
        timing.update(prepared.timing)
        if prepared.embedding_run_id is not None:  # which index the run searched
            db.link_eval_index(store, run_id, prepared.embedding_run_id)
        row_of = {d: i for i, d in enumerate(prepared.doc_ids)}
        sources = db.document_sources(store, corpus_id)
        units = topic_units([sources.get(d, "") for d in prepared.doc_ids], prepared.labels)
        todo = {s: db.completed_queries(store, run_id, s) for s in strategies}
        edited = edited_since(prior_info, queries)  # scored from an older version: scored again, every strategy
        for s in strategies:
            todo[s] -= edited
            if STRATEGIES[s].llm:
                todo[s] -= _llm_failed_queries(store, run_id, s)
        pending_q = [q for q in queries if any(q.id not in done for done in todo.values())]
        total = sum(1 for s in strategies for q in queries if q.id not in todo[s])
        done_count = 0
        if pending_q:
            with _seconds_into(timing, "embed_queries"):  # kept when the session is stopped in there too
                qemb, _ = cached_embed(qlm, [q.text for q in pending_q], kind="query", layer=layer_idx,
                                       batch_size=16, progress=stage("queries"), cancel=cancel)
            if families:
                assert endpoint is not None
                t0 = time.perf_counter()
                wanted = {fam: [q for q in pending_q if any(q.id not in todo[s] for s in strategies
                                                            if STRATEGIES[s].source == fam)]
                          for fam in families}
                try:
                    _expand_queries(endpoint, store, families, wanted, options, stage, cancel, expanded, save_usage,
                                    stopped)
                finally:  # a session stopped here spent these seconds too (added to earlier sessions' on store)
                    timing["llm_expansions_s"] = time.perf_counter() - t0
            need_fusion = any(STRATEGIES[s].kind.startswith("fusion") and not STRATEGIES[s].llm
                              for s in strategies)
            partemb = None
            part_rows: dict[int, tuple[int, ...]] = {}
            if any(STRATEGIES[s].kind == "parts" for s in strategies):  # every query's sentences, one batch
                part_texts, rows_of = query_part_rows([q.text for q in pending_q])
                part_rows = {q.id: r for q, r in zip(pending_q, rows_of)}
                with _seconds_into(timing, "embed_queries"):
                    partemb, _ = cached_embed(qlm, part_texts, kind="query", layer=layer_idx, batch_size=16,
                                              progress=stage("query parts"), cancel=cancel)
            sub_texts: list[str] = []
            sub_rows: dict[int, tuple[int, ...]] = {}
            fallback: set[int] = set()
            if need_fusion:
                for q in pending_q:
                    subs = [f for f in q.fusion if f.strip()]
                    if not subs:
                        subs = [q.text]
                        fallback.add(q.id)
                    sub_rows[q.id] = tuple(range(len(sub_texts), len(sub_texts) + len(subs)))
                    sub_texts.extend(subs)
                with _seconds_into(timing, "embed_queries"):
                    subemb, _ = cached_embed(qlm, sub_texts, kind="query", layer=layer_idx, batch_size=16,
                                             progress=stage("sub-queries"), cancel=cancel)
            # All expansion texts of every family in one batched pass; a failed expansion -> the query's text.
            exp_texts = TextBatch()
            text_of = {q.id: q.text for q in pending_q}
            for (fam, qid), outcome in expanded.items():
                exp_texts.add((fam, qid), list(outcome.texts) if outcome.ok else [text_of[qid]])
            exp_rows = exp_texts.rows
            expemb = None
            if exp_texts.texts:
                with _seconds_into(timing, "embed_queries"):
                    expemb, _ = cached_embed(qlm, exp_texts.texts, kind="query", layer=layer_idx, batch_size=16,
                                             progress=stage("expansions"), cancel=cancel)
            qrow = {q.id: i for i, q in enumerate(pending_q)}
            skipped_gt = 0
            for s in strategies:
                spec = STRATEGIES[s]
                rest = [q for q in pending_q if q.id not in todo[s]]
                for start in range(0, len(rest), batch_size):
                    if cancel is not None and cancel.is_set():
                        raise EvaluationCancelled("cancelled")
                    batch = rest[start:start + batch_size]
                    cases: list[QueryCase] = []
                    rows: list[int] = []
                    sub_take: list[int] = []
                    exp_take: list[int] = []
                    part_take: list[int] = []
                    for q in batch:
                        relevant = tuple(row_of[d] for d in q.ground_truth if d in row_of)
                        if len(relevant) < len(q.ground_truth):
                            skipped_gt += 1
                        srows: tuple[int, ...] = ()
                        prows: tuple[int, ...] = ()
                        erows: dict[str, tuple[int, ...]] = {}
                        if spec.kind == "parts":
                            prows = tuple(range(len(part_take), len(part_take) + len(part_rows[q.id])))
                            part_take.extend(part_rows[q.id])
                        elif spec.kind.startswith("fusion") and not spec.llm:
                            srows = tuple(range(len(sub_take), len(sub_take) + len(sub_rows[q.id])))
                            sub_take.extend(sub_rows[q.id])
                        elif spec.llm:
                            mine = exp_rows[(spec.source, q.id)]
                            erows[spec.source] = tuple(range(len(exp_take), len(exp_take) + len(mine)))
                            exp_take.extend(mine)
                        cases.append(QueryCase(relevant, q.n_aspects, srows, erows, prows))
                        rows.append(qrow[q.id])
                    t0 = time.perf_counter()
                    res = evaluate(prepared.index, qemb.take(rows), cases, prepared.labels, [s], k_max=k_max, c=c,
                                   subqueries=subemb.take(sub_take) if sub_take else None,
                                   expansions=expemb.take(exp_take) if exp_take and expemb is not None else None,
                                   hyde_with_query=options.hyde_with_query, cancel=cancel, units=units,
                                   parts=partemb.take(part_take) if partemb is not None else None)
                    eval_s[s] = eval_s.get(s, 0.0) + time.perf_counter() - t0
                    sr = res.strategies[s]
                    db.save_eval_results(store, run_id, [
                        {"strategy": s, "query_id": q.id,
                         "retrieved": [prepared.doc_ids[r] for r in sr.retrieved[i][:k_max]],
                         "rsr": sr.rsr[i].tolist(), "csr": sr.csr[i].tolist(),
                         "details": _details(spec, q.id, fallback, expanded)}
                        for i, q in enumerate(batch)
                    ], fingerprints={q.id: query_fingerprint(q) for q in batch})
                    done_count += len(batch)
                    if progress is not None:
                        progress("evaluation", done_count, total)
            timing["evaluate"] = _added_seconds(prior.get("evaluate"), eval_s)
            warnings = []
            if skipped_gt:
                warnings.append(f"{skipped_gt} query result(s) had ground-truth documents missing from the index")
            failed = sum(1 for o in expanded.values() if not o.ok)
            if failed:
                warnings.append(f"{failed} LLM expansion(s) failed; those queries were searched with their own text")
            if warnings:
                timing["warning"] = "; ".join(warnings)
        timing["total_s"] = float(prior.get("total_s", 0.0)) + time.perf_counter() - t_start
        db.finish_eval_run(store, run_id, status="done", timing=_with_prior_sessions(prior, timing),
                           llm_usage=usage(), owner=owner)
        return run_id
    except (EvaluationCancelled, ExtractionCancelled):
        db.finish_eval_run(store, run_id, status="cancelled", timing=stopped_timing(), llm_usage=usage(), owner=owner)
        return run_id
    except Exception as exc:
        db.finish_eval_run(store, run_id, status="failed", timing=stopped_timing(),
                           error=f"{type(exc).__name__}: {exc}", llm_usage=usage(), owner=owner)
        raise
    except BaseException:  # interrupted (Streamlit rerun / stop, Ctrl-C): resumable, not failed
        try:
            db.finish_eval_run(store, run_id, status="cancelled", timing=stopped_timing(), llm_usage=usage(),
                               owner=owner)
        finally:
            raise


@contextmanager
def _seconds_into(timing: dict[str, Any], key: str) -> Iterator[None]:
    """Add the seconds spent in the ``with`` block to ``timing[key]`` (from 0), also when the block raises: a
    session stopped while embedding spent those seconds too (:func:`_with_prior_sessions` adds them up)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        timing[key] = float(timing.get(key, 0.0)) + time.perf_counter() - t0


SESSION_SECONDS = ("embed_documents", "load_index", "embed_queries", "llm_expansions_s")
"""Timings that :func:`_score_run` measures per session (from 0), and stores added to the earlier sessions' ones."""


def _with_prior_sessions(prior: Mapping[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    """``session`` (this session's timing) with each of :data:`SESSION_SECONDS` it has added to ``prior``'s (the
    earlier sessions' stored timing): a run stopped and resumed reports the seconds of all its sessions, as
    ``total_s`` and ``evaluate`` do. A key this session did not reach is left out (the stored one is kept)."""
    return {**session, **{key: float(prior.get(key) or 0.0) + float(session[key])
                          for key in SESSION_SECONDS if key in session}}


def _added_seconds(prior: Any, now: dict[str, float]) -> dict[str, float]:
    """Seconds per strategy of this session (``now``) added to an earlier session's (``prior``, when a dict; its
    strategies this session did not search keep their seconds)."""
    earlier = {k: float(v) for k, v in prior.items()} if isinstance(prior, dict) else {}
    return {**earlier, **{k: earlier.get(k, 0.0) + v for k, v in now.items()}}


def _details(spec: Strategy, query_id: int, fallback: set[int],
             expanded: dict[tuple[str, int], ExpansionOutcome]) -> dict[str, Any] | None:
    """A result's ``details``: ``fusion_fallback`` for Fusion without stored sub-queries; ``llm`` (the
    expansion record, ``fallback`` when it failed) for LLM strategies."""
    if spec.llm:
        outcome = expanded.get((spec.source, query_id))
        if outcome is None:
            return None
        record = outcome.record()
        if not outcome.ok:
            record["fallback"] = "query text"
        return {"llm": record}
    if spec.kind.startswith("fusion") and query_id in fallback:
        return {"fusion_fallback": True}
    return None


def finished_run_message(run: db.EvalRunInfo) -> str:
    """Why a finished (``done``) run is not resumed, and what to do instead."""
    return (f"evaluation run {run.id} is finished (done) and is not resumed: a finished run is kept as it is, to "
            "compare other runs against. To score the query set as it is now, start a new run with the same "
            "settings.")


def resume_evaluation(store: db.Store, run_id: int, *, lm: Any | None = None,
                      progress: ProgressFn | None = None, cancel: threading.Event | None = None,
                      llm_config: LLMConfig | None = None) -> int:
    """Continue a cancelled / failed / interrupted run from where its saved results stop
    (LLM strategies: ``llm_config`` or the environment's endpoint; cached answers cost nothing).
    Queries edited since the run scored them are scored again, every strategy (see the module doc).
    A finished (``done``) run is refused with :class:`EvaluationInputError` (:func:`finished_run_message`) and
    left unchanged, even when queries were edited since: it is a record other runs are compared against."""
    try:
        info = db.get_eval_run(store, run_id)
    except db.NotFoundError as exc:
        raise EvaluationInputError(f"evaluation run {run_id} does not exist") from exc
    return run_evaluation(store, corpus_id=info.corpus_id, query_set_id=info.query_set_id,
                          settings=RetrievalSettings(model=str(info.config.get("model") or DEFAULT_MODEL)),
                          run_id=run_id, lm=lm, progress=progress, cancel=cancel, llm_config=llm_config)


def layer_sweep(
    store: db.Store,
    *,
    corpus_id: int,
    query_set_id: int,
    layers: Sequence[int],
    settings: RetrievalSettings = RetrievalSettings(),
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    lm: Any | None = None,
    llm_config: LLMConfig | None = None,
    llm_options: LLMOptions | None = None,
    batch_size: int = DEFAULT_BATCH,
) -> list[int]:
    """One run per layer of one model (the same ``settings``, their ``layer`` set per run); the runs share a
    ``config.sweep`` id and record all the sweep's layers (``config.sweep_layers``, as requested), so
    :func:`resume_sweep` can finish a stopped sweep. Stops after a run that did not finish (``cancel``
    set, or stopped otherwise). LLM expansions are asked once: the later layers' runs read them from the cache."""
    if not layers:
        raise EvaluationInputError("choose at least one layer")
    lm = _load_model(settings.model, lm)
    sweep = uuid.uuid4().hex[:12]
    return _sweep_layers(store, list(layers), sweep=sweep, progress=progress, runs=lambda layer, prog: run_evaluation(
        store, corpus_id=corpus_id, query_set_id=query_set_id, settings=settings.with_(layer=layer), progress=prog,
        cancel=cancel, lm=lm, extra_config={"sweep": sweep, "sweep_layers": list(layers)}, llm_config=llm_config,
        llm_options=llm_options, batch_size=batch_size))


def _sweep_layers(store: db.Store, layers: list[int], *, sweep: str, progress: ProgressFn | None,
                  runs: Callable[[int, ProgressFn], int]) -> list[int]:
    """``runs(layer, progress)`` for each of ``layers`` in order (progress stages prefixed with the layer), until
    one returns a run that did not finish; returns the run ids."""
    ids: list[int] = []
    for i, layer in enumerate(layers):
        def prog(stage: str, done: int, total: int, _i: int = i, _layer: int = layer) -> None:
            if progress is not None:
                progress(f"layer {_layer} ({_i + 1}/{len(layers)}): {stage}", done, total)

        ids.append(runs(layer, prog))
        if db.get_eval_run(store, ids[-1]).status != "done":
            break
    return ids


def _requested_layer(run: db.EvalRunInfo) -> int:
    """The layer a run was asked for (``-1`` = last), or its resolved layer for a run stored before that was kept."""
    return int(run.config.get("layer_requested", run.config.get("layer", 0)))


@dataclass(frozen=True)
class SweepPlan:
    """A stored layer sweep: its runs (ascending layer) and the layers it was started with.

    ``layers``: ``config.sweep_layers`` as requested (``-1`` = last); for a sweep stored before that was
    recorded, the requested layers of its runs. ``missing``: layers without a run yet (the sweep stopped
    before them); ``unfinished``: its runs not done."""

    sweep: str
    layers: list[int]
    runs: list[db.EvalRunInfo]

    @property
    def model(self) -> str:
        return str(self.runs[0].config.get("model", "?")) if self.runs else "?"

    def run_for(self, layer: int) -> db.EvalRunInfo | None:
        """The sweep's run of requested ``layer`` (the newest, should there be several)."""
        found = [r for r in self.runs if _requested_layer(r) == layer]
        return max(found, key=lambda r: r.id) if found else None

    @property
    def missing(self) -> list[int]:
        return [layer for layer in self.layers if self.run_for(layer) is None]

    @property
    def unfinished(self) -> list[db.EvalRunInfo]:
        return [r for r in self.runs if r.status != "done"]

    @property
    def finished(self) -> bool:
        return not self.missing and not self.unfinished


def sweep_plans(store: db.Store, corpus_id: int | None = None) -> list[SweepPlan]:
    """Every stored layer sweep (of one corpus), newest first."""
    members: dict[str, list[db.EvalRunInfo]] = {}
    for r in db.list_eval_runs(store, corpus_id=corpus_id):  # newest first
        if sid := r.config.get("sweep"):
            members.setdefault(str(sid), []).append(r)
    plans = []
    for sid, runs in members.items():
        runs = sorted(runs, key=lambda r: int(r.config.get("layer", 0)))
        planned = next((r.config["sweep_layers"] for r in runs if r.config.get("sweep_layers")), None)
        layers = [int(x) for x in planned] if planned else list(dict.fromkeys(_requested_layer(r) for r in runs))
        plans.append(SweepPlan(sid, layers, runs))
    return plans


def resume_sweep(store: db.Store, run_id: int, *, lm: Any | None = None, progress: ProgressFn | None = None,
                 cancel: threading.Event | None = None, llm_config: LLMConfig | None = None) -> list[int]:
    """Finish the layer sweep of run ``run_id``: each of its layers in order, resuming an unfinished run and
    starting the layers that have none with the sweep's settings (done layers are skipped); stops after a run
    that did not finish. A run outside any sweep is resumed alone (:func:`resume_evaluation`). Returns the ids
    of the runs resumed or started."""
    try:
        info = db.get_eval_run(store, run_id)
    except db.NotFoundError as exc:
        raise EvaluationInputError(f"evaluation run {run_id} does not exist") from exc
    sid = info.config.get("sweep")
    plan = next((p for p in sweep_plans(store, info.corpus_id) if p.sweep == sid), None) if sid else None
    if plan is None:
        return [resume_evaluation(store, run_id, lm=lm, progress=progress, cancel=cancel, llm_config=llm_config)]
    cfg = info.config
    lm = _load_model(str(cfg.get("model") or DEFAULT_MODEL), lm)
    todo = [layer for layer in plan.layers if (r := plan.run_for(layer)) is None or r.status != "done"]

    def run_layer(layer: int, prog: ProgressFn) -> int:
        existing = plan.run_for(layer)
        if existing is not None:
            return resume_evaluation(store, existing.id, lm=lm, progress=prog, cancel=cancel, llm_config=llm_config)
        asked = RetrievalSettings.from_dict(cfg, requested=True, seed=int(info.seed or 0)).with_(layer=layer)
        return run_evaluation(
            store, corpus_id=info.corpus_id, query_set_id=info.query_set_id, settings=asked, progress=prog,
            cancel=cancel, lm=lm,
            extra_config={"sweep": plan.sweep, "sweep_layers": plan.layers}, llm_config=llm_config,
            llm_options=LLMOptions.from_dict(cfg.get("llm")) if cfg.get("llm") else None)

    return _sweep_layers(store, todo, sweep=plan.sweep, progress=progress, runs=run_layer)


# --------------------------------------------------------------------------- loading and views


@dataclass
class RunMetrics:
    """A stored run as frames.

    * ``per_query``: one row per (strategy, query, k): ``strategy, query_id, n_aspects, k, rsr, csr, weighted``;
    * ``summary``: means over queries per (strategy, n_aspects, k) with ``n_queries``;
    * ``queries``: ``query_id, text, n_aspects, ground_truth`` of the scored queries;
    * ``retrieved``: ``{(strategy, query_id): [doc ids]}``;
    * ``details``: ``{(strategy, query_id): details}`` for results that have details (LLM cost, fallbacks);
    * ``edited``: scored queries whose text, ground truth or aspect count changed after the run (their stored
      scores are those of the old version; runs stored before fingerprints were kept report none).

    ``n_aspects`` is the aspect count a query had when the run scored it (its current one for older runs).
    """

    run: db.EvalRunInfo
    per_query: pd.DataFrame
    summary: pd.DataFrame
    queries: pd.DataFrame
    retrieved: dict[tuple[str, int], list[int]]
    details: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    edited: list[int] = field(default_factory=list)

    @property
    def strategies(self) -> list[str]:
        order = list(self.run.config.get("strategies", []))
        found = list(dict.fromkeys(self.per_query["strategy"])) if len(self.per_query) else []
        return [s for s in order if s in found] + [s for s in found if s not in order]

    @property
    def k_max(self) -> int:
        return int(self.run.config.get("k_max", 0)) or (int(self.per_query["k"].max()) if len(self.per_query) else 0)

    @property
    def w(self) -> float:
        return float(self.run.config.get("w", DEFAULT_W))


def load_run_metrics(store: db.Store, run_id: int) -> RunMetrics:
    """Frames of a stored run (see :class:`RunMetrics`). Raises NotFoundError."""
    run = db.get_eval_run(store, run_id)
    w = float(run.config.get("w", DEFAULT_W))
    results = db.load_eval_results(store, run_id)
    qrows = {q.id: q for q in db.list_queries(store, run.query_set_id)}
    saved = db.query_fingerprints(run.config)

    def aspects(qid: int) -> int:  # as scored: the run's fingerprint, else the query's current count
        if fp := saved.get(str(qid)):
            return int(str(fp).split(":", 1)[0])
        return qrows[qid].n_aspects if qid in qrows else 0

    recs: dict[str, list[Any]] = {k: [] for k in ("strategy", "query_id", "n_aspects", "k", "rsr", "csr")}
    retrieved: dict[tuple[str, int], list[int]] = {}
    details: dict[tuple[str, int], dict[str, Any]] = {}
    for r in results:
        if r.details:
            details[(r.strategy, r.query_id)] = r.details
        n = aspects(r.query_id)
        kk = len(r.rsr)
        recs["strategy"].extend([r.strategy] * kk)
        recs["query_id"].extend([r.query_id] * kk)
        recs["n_aspects"].extend([n] * kk)
        recs["k"].extend(range(1, kk + 1))
        recs["rsr"].extend(r.rsr)
        recs["csr"].extend(r.csr)
        retrieved[(r.strategy, r.query_id)] = r.retrieved
    per_query = pd.DataFrame(recs)
    per_query["weighted"] = (w * per_query["rsr"] + per_query["csr"]) / (w + 1.0)
    if len(per_query):
        summary = (per_query.groupby(["strategy", "n_aspects", "k"], sort=True)
                   .agg(rsr=("rsr", "mean"), csr=("csr", "mean"), weighted=("weighted", "mean"),
                        n_queries=("query_id", "nunique")).reset_index())
    else:
        summary = pd.DataFrame(columns=["strategy", "n_aspects", "k", "rsr", "csr", "weighted", "n_queries"])
    scored = sorted({r.query_id for r in results})
    queries = pd.DataFrame([{"query_id": q, "text": qrows[q].text if q in qrows else "",
                             "n_aspects": aspects(q),
                             "ground_truth": qrows[q].ground_truth if q in qrows else []} for q in scored],
                           columns=["query_id", "text", "n_aspects", "ground_truth"])
    edited = [q for q in scored if str(q) in saved and (q not in qrows or query_fingerprint(qrows[q]) != saved[str(q)])]
    return RunMetrics(run, per_query, summary, queries, retrieved, details, edited)


def edited_note(metrics: RunMetrics, limit: int = 10) -> str | None:
    """The warning for a run whose queries were edited after it ran (None when none was). For a done run it
    suggests a new run; for an unfinished one, resuming it (which scores the edited queries again)."""
    ids = metrics.edited
    if not ids:
        return None
    shown = ", ".join(f"#{q}" for q in ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
    one = len(ids) == 1
    return (f"Run #{metrics.run.id}: {len(ids)} of its {len(metrics.queries)} queries ({shown}) "
            f"{'was' if one else 'were'} edited after the run (text, ground truth or aspect count): "
            f"{'its' if one else 'their'} stored scores are those of the version the run searched. "
            + ("Start a new run to score the query set as it is now." if metrics.run.status == "done" else
               f"Resuming the run scores {'it' if one else 'them'} again as {'it is' if one else 'they are'} now."))


def coverage_note(metrics: RunMetrics) -> str | None:
    """The warning for a run stopped part-way; None when every strategy it was asked for scored the same queries.

    A run scores one strategy after the other, so a stop leaves the later strategies with fewer queries (their
    per-strategy means are then over different queries) and the last ones with none: those are named, since the
    views and exports leave out a strategy without results."""
    pq = metrics.per_query
    counts = {s: int(pq.loc[pq["strategy"] == s, "query_id"].nunique()) for s in metrics.strategies}
    missing = [s for s in metrics.run.config.get("strategies", []) if s not in counts]
    parts = []
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{s} {n}" for s, n in counts.items())
        parts.append(f"Its strategies scored different numbers of queries ({listed}), so their means are over "
                     "different queries and do not compare; the JSON export holds only the queries every strategy "
                     "scored.")
    if missing:
        one = len(missing) == 1
        parts.append(f"{', '.join(missing)} scored no query yet, so {'it is' if one else 'they are'} missing from "
                     "the tables, figures and exports below.")
    return " ".join([*parts, "Resume the run to score the rest."]) if parts else None



COST_COLUMNS = ["llm_queries", "prompt_tokens", "completion_tokens", "tokens", "tokens_per_query", "spent_tokens",
                "llm_s", "cached", "failed"]
SHARED_COLUMN = "shared_with"
"""The column naming the strategies that searched the same LLM expansions as a row's (their calls are shared)."""


def cost_row(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """:data:`COST_COLUMNS` of expansion records (:func:`~mrag_core.llm_strategies.cost_summary`)."""
    summary = cost_summary(records)
    return {"llm_queries": summary["expansions"], "prompt_tokens": summary["prompt_tokens"],
            "completion_tokens": summary["completion_tokens"], "tokens": summary["tokens"],
            "tokens_per_query": summary["tokens_per_query"], "spent_tokens": summary["spent_tokens"],
            "llm_s": summary["latency_s"], "cached": summary["cached"], "failed": summary["failed"]}


def _llm_records(metrics: RunMetrics, strategy: str | None = None) -> list[tuple[str, int, dict[str, Any]]]:
    """``(strategy, query id, details["llm"])`` of the run's results (of ``strategy`` when given)."""
    return [(s, q, d["llm"]) for (s, q), d in metrics.details.items()
            if (strategy is None or s == strategy) and isinstance(d.get("llm"), dict)]


def shared_with(strategies: Sequence[str], strategy: str) -> list[str]:
    """The other ``strategies`` that search the same LLM expansions as ``strategy`` (its family's other form:
    ``multi-query`` and ``multi-query-mrag`` search the same rewrites, one LLM call per query serving both)."""
    family = family_of(strategy)
    return [] if family is None else [s for s in strategies if s != strategy and family_of(s) == family]


def sharing_expansions(metrics: RunMetrics, strategy: str) -> list[str]:
    """The run's other strategies that search the same LLM expansions as ``strategy`` (:func:`shared_with`)."""
    return shared_with(metrics.strategies, strategy)


def llm_cost(metrics: RunMetrics, strategy: str) -> dict[str, Any]:
    """LLM cost of one strategy of a run, from its results' ``details["llm"]``
    (:func:`~mrag_core.llm_strategies.cost_summary`; all zeros for a strategy without an LLM).
    ``llm_queries`` = queries expanded by the LLM; ``tokens`` counts what the expansions cost (cache hits at their
    original cost), ``spent_tokens`` / ``llm_s`` what was sent / waited for when the results were computed.

    The cost of what this strategy searched, whether or not another strategy searched it too: ``shared_with``
    names the run's strategies that share these expansions (:func:`sharing_expansions`), whose rows count the
    same calls; adding rows up counts them once per strategy, :func:`llm_cost_total` counts each once.
    ``spent_tokens`` / ``llm_s`` are what the run sent / waited for over all its sessions for the strategy's LLM
    family (:func:`_sent_by_run`): a resume served from the cache (0 spent) what a stopped session had sent."""
    row = cost_row([r for _, _, r in _llm_records(metrics, strategy)])
    family = family_of(strategy)
    if family is not None:
        row["spent_tokens"], row["llm_s"] = _sent_by_run(metrics.run, row["spent_tokens"], row["llm_s"], family)
    return {**row, SHARED_COLUMN: ", ".join(sharing_expansions(metrics, strategy))}


def llm_cost_total(metrics: RunMetrics) -> dict[str, Any]:
    """LLM cost of the whole run (:data:`COST_COLUMNS`), each expansion counted once: one record per (LLM family,
    query), whichever strategies searched it. Of the records of one (family, query), that of the call actually
    sent is kept (a strategy scored in a later session got the same expansion from the cache: 0 spent, 0 s);
    so ``tokens`` is what the run's expansions cost, never counted once per strategy that shares them.

    ``spent_tokens`` / ``llm_s`` are what the run sent / waited for over all its sessions (:func:`_sent_by_run`):
    the stored results alone miss an expansion sent by a session that stopped before storing its result and
    served from the cache on resume (0 spent there)."""
    total = once_each_cost(_llm_records(metrics))
    spent, llm_s = _sent_by_run(metrics.run, total["spent_tokens"], total["llm_s"])
    return {**total, "spent_tokens": spent, "llm_s": llm_s}


def _sent_by_run(run: db.EvalRunInfo, stored_spent: int, stored_s: float, family: str | None = None
                 ) -> tuple[int, float]:
    """``(tokens, LLM seconds)`` the run actually sent / waited for (for ``family``'s expansions only, when given):
    the larger of its sessions' own totals (``llm_usage["total"]``, or ``llm_usage["families"][family]``:
    ``spent_tokens`` / ``latency_s``, each session's sent calls added up, cache hits 0) and what its stored results
    record (``stored_spent`` / ``stored_s``). Each is a lower bound: the results miss calls whose result a stopped
    session never stored; ``llm_usage`` misses, of a session still running or one that died without ending, the
    answers of its last :data:`USAGE_EVERY_S` (stored that often while expanding)."""
    usage = run.llm_usage if isinstance(run.llm_usage, dict) else {}
    if family is None:
        total = usage.get("total")
    else:
        families = usage.get("families")
        total = families.get(family) if isinstance(families, dict) else None
    total = total if isinstance(total, dict) else {}
    usage_spent, usage_s = total.get("spent_tokens"), total.get("latency_s")
    spent = max(int(stored_spent), int(usage_spent) if _is_number(usage_spent) else 0)
    seconds = max(float(stored_s), float(usage_s) if _is_number(usage_s) else 0.0)
    return spent, seconds


def _is_number(value: Any) -> bool:
    """True for an int or float that is not a bool (a JSON number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def once_each_cost(records: Iterable[tuple[str, Hashable, Mapping[str, Any]]]) -> dict[str, Any]:
    """:data:`COST_COLUMNS` of ``(strategy, query key, expansion record)`` triples with each expansion counted
    once: one record per (LLM family, query key), the family being the record's ``family`` or the strategy's;
    of the records of one expansion, that of the call actually sent (not ``cached``) is kept. The rule of
    :func:`llm_cost_total`, for any list of expansions (``bench`` keys its queries by position)."""
    once: dict[tuple[str, Hashable], Mapping[str, Any]] = {}
    for s, q, record in records:
        key = (str(record.get("family") or family_of(s)), q)
        kept = once.get(key)
        if kept is None or (kept.get("cached") and not record.get("cached")):
            once[key] = record
    return cost_row(once.values())


def runs_llm_tokens(store: db.Store, run_ids: Sequence[int]) -> dict[int, int]:
    """Per run: the tokens of its LLM expansions, each counted once (``tokens`` of :func:`llm_cost_total`, the
    total under the run's cost table), from its stored results alone; 0 for a run without any. Not the run's
    ``llm_usage["total"]["tokens"]``, which adds up its sessions: a resume's cache hits on the expansions an
    earlier session asked for count there a second time, at their original cost."""
    records = db.eval_llm_records(store, run_ids)
    return {rid: int(once_each_cost(records.get(rid, []))["tokens"]) for rid in run_ids}


def shared_expansions_note(strategies: Sequence[str]) -> str | None:
    """Which of ``strategies`` share their LLM expansions, said once under a cost table (None when none do)."""
    pairs = [" and ".join(g) for g in ([s for s in strategies if family_of(s) == f] for f in LLM_FAMILIES)
             if len(g) > 1]
    if not pairs:
        return None
    return (pairs[0] + " share their LLM expansions" + "".join(f", as do {p}" for p in pairs[1:])
            + " (one call per query serves both strategies): each of their rows counts those calls, so a sum of "
            "the rows counts them twice; the total counts each call once.")


def llm_total_note(metrics: RunMetrics) -> str | None:
    """The line under a run's cost table that totals its LLM-assisted strategies, each call counted once
    (:func:`llm_cost_total`), and says which share their expansions (:func:`shared_expansions_note`); None when
    the run has fewer than two LLM-assisted strategies (a single row is its own total)."""
    if sum(1 for s in metrics.strategies if family_of(s) is not None) < 2:
        return None
    total = llm_cost_total(metrics)
    shared = shared_expansions_note(metrics.strategies)
    return (f"All LLM-assisted strategies together, each LLM call counted once: {total['tokens']} tokens over "
            f"{total['llm_queries']} expansions, {total['spent_tokens']} spent, {total['llm_s']:.2f} LLM s."
            + (f" {shared}" if shared else ""))


def accuracy_and_cost(metrics: RunMetrics, *, k: int | None = None) -> pd.DataFrame:
    """Per strategy: mean RSR / CSR / weighted at k (default k = each query's aspect count) over all
    scored queries, the search seconds (``timing.evaluate``) and the LLM cost (:func:`llm_cost`):
    strategies that trade tokens for recall side by side with those that spend none."""
    pq = metrics.per_query
    search_s = metrics.run.timing.get("evaluate", {})
    rows = []
    for strat in metrics.strategies:
        sub = pq[pq["strategy"] == strat]
        want = sub["n_aspects"].map(lambda n, _km=metrics.k_max: _k_for(int(n), k, _km))
        at = sub[sub["k"] == want]
        rows.append({"strategy": strat, "rsr": float(at["rsr"].mean()), "csr": float(at["csr"].mean()),
                     "weighted": float(at["weighted"].mean()),
                     "search_s": float(search_s.get(strat, 0.0)) if isinstance(search_s, dict) else 0.0,
                     **llm_cost(metrics, strat)})
    return pd.DataFrame(rows, columns=["strategy", "rsr", "csr", "weighted", "search_s", *COST_COLUMNS, SHARED_COLUMN])


def without_unused_cost(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (:func:`accuracy_and_cost`) without its LLM cost columns (``shared_with`` too) when every one of
    them is zero (no strategy of the run used an LLM); otherwise unchanged."""
    cost = [c for c in COST_COLUMNS if c in table.columns]
    if cost and not table[cost].astype(float).to_numpy().any():
        return table.drop(columns=[*cost, *([SHARED_COLUMN] if SHARED_COLUMN in table.columns else [])])
    return table


def items_cost(store: db.Store, items: Sequence[tuple[int, str]], *,
               metrics: dict[int, RunMetrics] | None = None) -> pd.DataFrame:
    """LLM cost (:func:`llm_cost`) of each (run, strategy) item, labelled ``#run strategy`` as in
    :func:`compare_runs`; ``shared_with`` names the strategies of the item's run that share its expansions."""
    cache = dict(metrics or {})
    rows = []
    for run_id, strat in items:
        if run_id not in cache:
            cache[run_id] = load_run_metrics(store, run_id)
        rows.append({"item": f"#{run_id} {strat}", **llm_cost(cache[run_id], strat)})
    return pd.DataFrame(rows, columns=["item", *COST_COLUMNS, SHARED_COLUMN])


def to_evaluation_result(metrics: RunMetrics) -> EvaluationResult:
    """The stored run as an :class:`EvaluationResult` (queries by id; only queries every strategy has)."""
    pq = metrics.per_query
    strategies = metrics.strategies
    k_max = metrics.k_max
    common: set[int] | None = None
    for s in strategies:
        ids = set(pq.loc[pq["strategy"] == s, "query_id"])
        common = ids if common is None else common & ids
    qids = sorted(common or set())
    n_of = dict(zip(metrics.queries["query_id"], metrics.queries["n_aspects"]))
    result = EvaluationResult(k_max=k_max, cases=[QueryCase((), int(n_of.get(q, 0))) for q in qids])
    for s in strategies:
        sub = pq[pq["strategy"] == s]
        rsr = sub.pivot(index="query_id", columns="k", values="rsr").reindex(qids).to_numpy()
        csr = sub.pivot(index="query_id", columns="k", values="csr").reindex(qids).to_numpy()
        result.strategies[s] = StrategyResult(s, rsr, csr, [metrics.retrieved[(s, q)] for q in qids])
    return result


def authors_json(metrics: RunMetrics) -> str:
    """The run in the authors' layout: ``{strategy: {n_aspects: {success_ratio: [k][query], ...}}}``."""
    return json.dumps(authors_layout(to_evaluation_result(metrics)))


def authors_file_json(metrics: RunMetrics) -> str:
    """The run as the MRAG authors' result files are written (keys ``rat``, ``suc``, ``category_rat``,
    ``category_suc``; their strategy names): :func:`~mrag_core.evaluation.authors_file_layout`."""
    return json.dumps(authors_file_layout(to_evaluation_result(metrics)))


def plotter_json(metrics: RunMetrics) -> str:
    """The run as the authors' CLI plotter (``multirag-cli plot``) reads it: keys ``standard-rag``, ``multirag``,
    ``multirag-strategy-decay``... with ``success_ratio`` / ``category_success_ratio``
    (:func:`~mrag_core.evaluation.plotter_layout`)."""
    return json.dumps(plotter_layout(to_evaluation_result(metrics)))


def plotter_notes(metrics: RunMetrics) -> list[str]:
    """What the plotter cannot draw from :func:`plotter_json` of the run (strategy keys left out, query types or
    depth missing), in words; empty when it draws every figure (:func:`~mrag_core.evaluation.plotter_notes`)."""
    return result_plotter_notes(to_evaluation_result(metrics))


CSV_SETTINGS = ("run_id", "w", "k_max")
"""The run's settings that :func:`run_csv` repeats in every row, after the seven result columns."""


def run_csv(metrics: RunMetrics) -> str:
    """Per-query, per-k rows as CSV: strategy, query_id, n_aspects, k, rsr, csr, weighted, then the run's
    :data:`CSV_SETTINGS` in every row: ``weighted`` is (w·RSR + CSR) / (w + 1) with the run's ``w``, and ``k``
    runs 1..``k_max``; with them, the CSVs of several runs concatenated in pandas still say which run, which w and
    which k range each row comes from. Last, ``label``: the strategy's name as the app shows it (the registry's
    label, e.g. ``Sentence round-robin (Standard + MRAG per sentence)`` for the recommended one)."""
    buf = io.StringIO()
    frame = metrics.per_query[["strategy", "query_id", "n_aspects", "k", "rsr", "csr", "weighted"]]
    frame.assign(run_id=metrics.run.id, w=metrics.w, k_max=metrics.k_max,
                 label=frame["strategy"].map(label_of)).to_csv(buf, index=False)
    return buf.getvalue()


def export_name(metrics: RunMetrics) -> str:
    """The stem of a run's download files, naming the settings its numbers depend on: ``eval_run_7_w2_kmax32``
    (``w`` as written, 0.5 -> ``w0.5``), since the JSON layouts have no place for them."""
    return f"eval_run_{metrics.run.id}_w{metrics.w:g}_kmax{metrics.k_max}"


def _k_for(n: int, k: int | None, k_max: int) -> int:
    return min(k if k is not None else n, k_max)


def relative_improvement(metrics: RunMetrics, *, baseline: str = "standard", k: int | None = None) -> pd.DataFrame:
    """Per (strategy, n_aspects): mean weighted ratio at ``k`` (default k = n_aspects) and its relative
    improvement over ``baseline``: ``weighted / weighted_baseline - 1`` (NaN when the baseline is 0).

    Both means are over the queries that the strategy and the baseline both scored (``queries``): in a stopped
    run one strategy may have more queries than the other, and an aspect count the baseline has not reached
    yet has no row (it raised KeyError)."""
    columns = ["strategy", "n_aspects", "k", "weighted", "baseline", "improvement", "queries"]
    pq = metrics.per_query
    if baseline not in set(pq["strategy"]):
        return pd.DataFrame(columns=columns)
    rows = []
    for n in sorted(set(pq["n_aspects"])):
        kk = _k_for(int(n), k, metrics.k_max)
        at = pq[(pq["n_aspects"] == n) & (pq["k"] == kk)]
        base_q = at[at["strategy"] == baseline].set_index("query_id")["weighted"]
        for strat in metrics.strategies:
            if strat == baseline:
                continue
            own = at[at["strategy"] == strat].set_index("query_id")["weighted"]
            common = sorted(set(base_q.index) & set(own.index))
            if not common:
                continue
            base, val = float(base_q.loc[common].mean()), float(own.loc[common].mean())
            rows.append({"strategy": strat, "n_aspects": int(n), "k": kk, "weighted": val, "baseline": base,
                         "improvement": (val / base - 1.0) if base > 0 else float("nan"), "queries": len(common)})
    return pd.DataFrame(rows, columns=columns)


def single_aspect_table(metrics: RunMetrics, ks: Sequence[int] = (1, 2, 3)) -> pd.DataFrame:
    """Single-aspect queries: per strategy, how many found their document within the top k (k in ``ks``)."""
    pq = metrics.per_query[metrics.per_query["n_aspects"] == 1]
    rows = []
    for strat in metrics.strategies:
        sub = pq[pq["strategy"] == strat]
        row: dict[str, Any] = {"strategy": strat, "queries": int(sub["query_id"].nunique())}
        for k in ks:
            row[f"hits@{k}"] = int((sub.loc[sub["k"] == k, "rsr"] >= 1.0 - 1e-9).sum())
        rows.append(row)
    return pd.DataFrame(rows, columns=["strategy", "queries", *[f"hits@{k}" for k in ks]])


def _items_metrics(store: db.Store, items: Sequence[tuple[int, str]],
                   metrics: Mapping[int, RunMetrics] | None) -> dict[int, RunMetrics]:
    """``metrics`` with every run of ``items`` loaded (those missing read from the store)."""
    cache = dict(metrics or {})
    for run_id, _ in items:
        if run_id not in cache:
            cache[run_id] = load_run_metrics(store, run_id)
    return cache


def shared_k_max(metrics: Iterable[RunMetrics]) -> int:
    """The largest k that every run of ``metrics`` scored: the smallest k_max. Compared items are read at
    ``min(k, shared_k_max)`` (k = the query's aspect count by default), so that two runs scored with different k_max
    are never compared at two different k (at k = 25, a run of k_max 10 read at k = 10 would look worse than the
    same retrieval read at k = 25)."""
    return min(m.k_max for m in metrics)


def _most_aspects(metrics: Mapping[int, RunMetrics]) -> int:
    """The largest aspect count among the compared runs' queries (the k read there when k follows it)."""
    return max((int(n) for m in metrics.values() for n in m.queries["n_aspects"]), default=0)


def compare_k_note(metrics: Mapping[int, RunMetrics], k: int | None) -> str | None:
    """The caption for compared runs scored with different k_max, when that lowers the k read (the asked ``k``, or
    the largest aspect count of their queries when k follows the aspect count); None otherwise."""
    ranges = {rid: m.k_max for rid, m in metrics.items()}
    if len(set(ranges.values())) < 2:
        return None
    cap = shared_k_max(metrics.values())
    wanted = k if k is not None else _most_aspects(metrics)
    if wanted <= cap:
        return None
    listed = ", ".join(f"#{rid} k = 1..{km}" for rid, km in ranges.items())
    asked = f"k = {k}" if k is not None else "k = the number of aspects"
    return (f"These runs scored different ranges of k ({listed}): every item is read at {asked}, but at most "
            f"k = {cap}, the largest k all of them scored, so each pair is compared at the same k.")


def compare_k_label(metrics: Mapping[int, RunMetrics], k: int | None) -> str:
    """At which k :func:`compare_runs` reads the compared runs, for the heading of its means: ``k = 5`` for a
    chosen k, ``k = each query's number of aspects`` when k follows the aspect count, each capped at
    :func:`shared_k_max` when that lowers it (:func:`compare_k_note` says why):
    ``k = 2 (5 asked; 2 is the largest k every run scored)``, ``k = each query's number of aspects, at most 2``."""
    cap = shared_k_max(metrics.values())
    if k is not None:
        return f"k = {k}" if k <= cap else f"k = {cap} ({k} asked; {cap} is the largest k every run scored)"
    return "k = each query's number of aspects" + (f", at most {cap}" if _most_aspects(metrics) > cap else "")


def compare_w_note(metrics: Mapping[int, RunMetrics], metric: str) -> str | None:
    """The warning for comparing the weighted ratio of runs stored with different w (None otherwise): each run's
    weighted ratio is (w·RSR + CSR) / (w + 1) with its own w, so the same retrieval scores differently."""
    weights = {rid: m.w for rid, m in metrics.items()}
    if metric != "weighted" or len(set(weights.values())) < 2:
        return None
    listed = ", ".join(f"#{rid} w = {w:g}" for rid, w in weights.items())
    return (f"These runs weight exact hits differently ({listed}): each weighted ratio is (w·RSR + CSR) / (w + 1) "
            "with its run's w, so their weighted ratios do not compare. Compare rsr or csr instead.")


def compare_runs(
    store: db.Store,
    items: Sequence[tuple[int, str]],
    *,
    metric: str = "weighted",
    k: int | None = None,
    metrics: dict[int, RunMetrics] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Compare (run, strategy) items on the same queries; the first item is the reference.

    Returns ``(means, tests)``: ``means`` has one row per (item, n_aspects) with the mean ``metric``
    at k (default k = n_aspects) and the number of paired queries; ``tests`` one row per
    (item other than the reference, n_aspects, plus ``"all"``) with the paired t-test and Wilcoxon
    p-values and win/tie/loss of the item against the reference, over queries both have; the p-values also
    Holm-adjusted over each item's rows, and the significance marks read from the adjusted ones (:func:`with_holm`).
    Every item is read at the same k, at most :func:`shared_k_max` of the runs (a run scored with a smaller k_max
    has no larger k; :func:`compare_k_note` says so).
    """
    if len(items) < 2:
        raise EvaluationInputError("choose at least two runs (or strategies) to compare")
    if metric not in ("rsr", "csr", "weighted"):
        raise EvaluationInputError(f"unknown metric {metric!r}")
    cache = _items_metrics(store, items, metrics)
    kmax = shared_k_max([cache[run_id] for run_id, _ in items])
    series: list[tuple[str, pd.Series]] = []
    for run_id, strat in items:
        m = cache[run_id]
        pq = m.per_query[m.per_query["strategy"] == strat]
        if pq.empty:
            raise EvaluationInputError(f"run {run_id} has no results for strategy {strat!r}")
        want = pq["n_aspects"].map(lambda n: _k_for(int(n), k, kmax))
        at = pq[pq["k"] == want].set_index("query_id")
        series.append((f"#{run_id} {strat}", at[metric]))
    sets = {cache[run_id].run.query_set_id: run_id for run_id, _ in reversed(items)}
    if len(sets) > 1:
        names = {q: _query_set_name(store, q) for q in sets}
        listed = ", ".join(f"#{rid} on {names[q]}" for q, rid in sorted(sets.items(), key=lambda kv: kv[1]))
        raise EvaluationInputError(f"These runs were scored on different query sets ({listed}) and share no query: "
                                   "paired tests compare the same queries, so choose runs of one query set.")
    n_of: dict[int, int] = {}
    for m in cache.values():
        n_of.update(dict(zip(m.queries["query_id"], m.queries["n_aspects"])))
    common = set(series[0][1].index)
    for _, s in series[1:]:
        common &= set(s.index)
    qids = sorted(common)
    groups: dict[Any, list[int]] = {}
    for q in qids:
        groups.setdefault(int(n_of.get(q, 0)), []).append(q)
    means_rows = []
    test_rows = []
    ref_label, ref = series[0]
    for n_key, ids in [*sorted(groups.items()), ("all", qids)]:
        n = str(n_key)  # aspect count as text, "all" for every query (one column type)
        for label, s in series:
            means_rows.append({"item": label, "n_aspects": n, metric: float(s.loc[ids].mean()) if ids else float("nan"),
                               "queries": len(ids)})
        for label, s in series[1:]:
            t = paired_test(s.loc[ids].to_numpy(), ref.loc[ids].to_numpy())
            test_rows.append({"item": label, "reference": ref_label, "n_aspects": n, "queries": t.n,
                              "mean_diff": _no_negative_zero(t.mean_diff), "t_p": t.t_pvalue,
                              "wilcoxon_p": t.wilcoxon_pvalue,
                              "wins": t.wins, "ties": t.ties, "losses": t.losses, "note": t.note})
    return pd.DataFrame(means_rows), with_holm(pd.DataFrame(test_rows))


HOLM_NOTE = ("Each item is tested against the reference once per aspect count and once over all queries, so some "
             "raw p-values can fall below 0.05 by chance alone. t_p_holm and wilcoxon_p_holm are Holm-adjusted over "
             "the item's own tests (Holm-Bonferroni: the smallest of its m p-values times m, the next times m - 1, and "
             "so on, never below the one before, at most 1), and the marks are read from these adjusted p-values: "
             "\\* p < 0.05, \\*\\* p < 0.01, \\*\\*\\* p < 0.001, n.s. not significant. Where a test cannot "
             "answer there is no p-value (the note says why), and it does not count in m.")
"""The caption of Compare runs' significance table: what the Holm columns are and that the marks read them."""

TESTS_COLUMNS = ["item", "reference", "n_aspects", "queries", "mean_diff", "t_p", "t_p_holm", "t_sig", "wilcoxon_p",
                 "wilcoxon_p_holm", "wilcoxon_sig", "wins", "ties", "losses", "note"]


def with_holm(tests: pd.DataFrame) -> pd.DataFrame:
    """``tests`` (one row per item and aspect count, with raw ``t_p`` and ``wilcoxon_p``) with Holm-adjusted
    p-values (``t_p_holm``, ``wilcoxon_p_holm``: :func:`~mrag_core.significance.holm_adjust` over the rows of one
    item, the family of its tests against the reference) and the significance marks of the adjusted values
    (``t_sig``, ``wilcoxon_sig``), in :data:`TESTS_COLUMNS` order. NaN p-values stay NaN and count in no family."""
    out = tests.copy()
    for raw in ("t_p", "wilcoxon_p"):
        adjusted = pd.Series(float("nan"), index=out.index, dtype=float)
        if len(out):
            for _, rows in out.groupby("item", sort=False)[raw]:
                adjusted.loc[rows.index] = holm_adjust(rows.tolist())
        out[f"{raw}_holm"] = adjusted
        out[raw.replace("_p", "_sig")] = adjusted.map(significance_mark)
    return out.reindex(columns=TESTS_COLUMNS)


def _query_set_name(store: db.Store, query_set_id: int) -> str:
    try:
        return repr(db.get_query_set(store, query_set_id).name)
    except db.NotFoundError:
        return f"query set {query_set_id} (deleted)"


def _no_negative_zero(x: float, digits: int = 12) -> float:
    """``x`` with rounding noise below ``10**-digits`` (and ``-0.0``) turned into ``0.0``."""
    return 0.0 if abs(x) < 10.0 ** -digits else float(x)


def signed(x: float, digits: int = 3) -> str:
    """A difference for display: ``+0.125``, ``-0.042``, and ``0.000`` (never ``-0.000``) when it rounds to zero
    at ``digits`` decimals; NaN as ``""``."""
    if x is None or x != x:
        return ""
    text = f"{x:+.{digits}f}"
    return f"{0.0:.{digits}f}" if float(text) == 0.0 else text


def means_table(means: pd.DataFrame, metric: str, items: Sequence[tuple[int, str]]) -> pd.DataFrame:
    """:func:`compare_runs`' ``means`` as a table: one row per aspect count (ascending, ``all`` last), one column
    per item in the order they were chosen (the reference first)."""
    pivot = means.pivot(index="n_aspects", columns="item", values=metric)
    columns = [c for c in dict.fromkeys(f"#{r} {s}" for r, s in items) if c in pivot.columns]
    rows = sorted(pivot.index, key=lambda n: (n == "all", int(n) if str(n).isdigit() else 0, str(n)))
    return pivot.loc[rows, columns]


FUSED_RUN_NOTE = ("Fusion RAG, Fusion MRAG and the LLM-assisted strategies merge one list per sub-query (or LLM text) "
                  "by Reciprocal Rank Fusion. In a run, as in the MRAG authors' evaluation, the lists fused at k are "
                  "each searched to depth k: at a larger k every sub-query's list is longer, and documents that "
                  "several sub-queries find lower down can outrank a sub-query's first hit, so these curves can fall "
                  "as k grows. Compare fuses each sub-query's top k too: a query opened there from a run shows the "
                  "run's Fusion numbers at that k (given the same sub-queries).")


def fused_strategies(strategies: Sequence[str]) -> list[str]:
    """The strategies among ``strategies`` that fuse several texts' lists (Fusion, Fusion MRAG, LLM-assisted)."""
    return [s for s in strategies if s in STRATEGIES and STRATEGIES[s].kind.startswith("fusion")]


def fused_depth_note(strategies: Sequence[str]) -> str | None:
    """:data:`FUSED_RUN_NOTE` when any of ``strategies`` fuses lists, else None: the caption under a run's figures."""
    return FUSED_RUN_NOTE if fused_strategies(strategies) else None


@dataclass(frozen=True)
class DrillDown:
    """What the Compare page needs to show one query of a run as the run scored it: the index the run searched
    (``embedding_run_id``, None when it no longer exists), the voting variant, c, k (None: the query's number of
    aspects, as the run's k = aspects), Compare's strategies for the chosen items, and the run's seed (the head
    importance: 0 is the one stored with the index; Compare samples another seed's pairs as the run did)."""

    run_id: int
    query_id: int
    embedding_run_id: int | None
    variant: str
    c: int
    k: int | None
    strategies: list[str]
    seed: int


COMPARE_STRATEGIES = tuple(s.id for s in STRATEGIES.values() if s.compare)  # Compare's own (non-LLM) strategies


def drilldown(store: db.Store, items: Sequence[tuple[int, str]], query_id: int, *, run_id: int | None = None,
              k: int | None = None) -> DrillDown:
    """The settings of run ``run_id`` (default: the first item's run) for opening ``query_id`` in Compare.

    The index: the one the run searched, else the finished index of its model, layer and pooling; voting: that
    of the first MRAG-like item of that run (its ``variant`` otherwise); c: the run's c; strategies: Compare's
    kinds of the chosen items (``mrag-decay`` -> ``mrag``), in Compare's order."""
    if not items:
        raise EvaluationInputError("choose at least one run to open in Compare")
    rid = run_id if run_id is not None else items[0][0]
    try:
        info = db.get_eval_run(store, rid)
    except db.NotFoundError as exc:
        raise EvaluationInputError(f"evaluation run {rid} does not exist") from exc
    cfg = info.config
    index_id = _searched_index(store, info)
    specs = [STRATEGIES[s] for _, s in items if s in STRATEGIES]
    voted = [STRATEGIES[s] for r, s in items
             if r == rid and s in STRATEGIES and STRATEGIES[s].kind in ("mrag", "fusion-mrag")
             and not STRATEGIES[s].llm]
    variant = voted[0].variant if voted else str(cfg.get("variant", "importance"))
    kinds = {sp.kind for sp in specs if not sp.llm}
    return DrillDown(run_id=rid, query_id=int(query_id), embedding_run_id=index_id, variant=variant,
                     c=int(cfg.get("c", DEFAULT_C)), k=k, seed=int(info.seed or 0),
                     strategies=[s for s in COMPARE_STRATEGIES if STRATEGIES[s].kind in kinds])


def _searched_index(store: db.Store, info: db.EvalRunInfo) -> int | None:
    """The finished index run ``info`` searched (or, when that is gone, the one of its model, layer and pooling)."""
    if info.embedding_run_id is not None:
        try:
            if db.get_embedding_run(store, info.embedding_run_id).status == "done":
                return info.embedding_run_id
        except db.NotFoundError:
            pass
    cfg = info.config
    for run in db.list_embedding_runs(store, info.corpus_id, status="done"):
        if (run.model_name == cfg.get("model") and run.layer == cfg.get("layer")
                and run.pooling == cfg.get("pooling", run.pooling)):
            return run.id
    return None


def per_query_comparison(store: db.Store, items: Sequence[tuple[int, str]], *, k: int | None = None,
                         metrics: dict[int, RunMetrics] | None = None) -> pd.DataFrame:
    """Weighted ratio per query (rows) and item (columns) at k (default n_aspects, at most :func:`shared_k_max` of
    the runs, as :func:`compare_runs` reads them), with query text."""
    cache = _items_metrics(store, items, metrics)
    kmax = shared_k_max([cache[run_id] for run_id, _ in items])
    frames = []
    texts: dict[int, str] = {}
    n_of: dict[int, int] = {}
    for run_id, strat in items:
        m = cache[run_id]
        texts.update(dict(zip(m.queries["query_id"], m.queries["text"])))
        n_of.update(dict(zip(m.queries["query_id"], m.queries["n_aspects"])))
        pq = m.per_query[m.per_query["strategy"] == strat]
        want = pq["n_aspects"].map(lambda n: _k_for(int(n), k, kmax))
        frames.append(pq[pq["k"] == want].set_index("query_id")["weighted"].rename(f"#{run_id} {strat}"))
    out = pd.concat(frames, axis=1, join="inner").reset_index()
    out.insert(1, "n_aspects", out["query_id"].map(n_of))
    out.insert(2, "text", out["query_id"].map(texts))
    return out


def layer_sweep_frame(store: db.Store, run_ids: Sequence[int], *, k: int | None = None) -> pd.DataFrame:
    """Per (layer, strategy): mean weighted ratio at k (default k = n_aspects) over all scored queries."""
    rows = []
    for rid in run_ids:
        m = load_run_metrics(store, rid)
        pq = m.per_query
        if pq.empty:
            continue
        want = pq["n_aspects"].map(lambda n, _km=m.k_max: _k_for(int(n), k, _km))
        at = pq[pq["k"] == want]
        for strat, grp in at.groupby("strategy"):
            rows.append({"run_id": rid, "layer": int(m.run.config.get("layer", -1)), "strategy": strat,
                         "weighted": float(grp["weighted"].mean()), "rsr": float(grp["rsr"].mean()),
                         "csr": float(grp["csr"].mean()), "queries": int(grp["query_id"].nunique())})
    return pd.DataFrame(rows, columns=["run_id", "layer", "strategy", "weighted", "rsr", "csr", "queries"]) \
        .sort_values(["strategy", "layer"]).reset_index(drop=True)


def sweeps(store: db.Store, corpus_id: int | None = None) -> dict[str, list[db.EvalRunInfo]]:
    """Stored layer sweeps that can be drawn: sweep id -> its runs with results (ascending layer), for the
    sweeps with results at two layers or more (newest first). A sweep stopped during its first layer, or after
    it, is not a sweep to look at yet: it is offered for resuming instead (:func:`sweep_plans`)."""
    out: dict[str, list[db.EvalRunInfo]] = {}
    for plan in sweep_plans(store, corpus_id):
        scored = [r for r in plan.runs if r.n_results]
        if len({int(r.config.get("layer", 0)) for r in scored}) >= 2:
            out[plan.sweep] = scored
    return out


def weighted(rsr: float, csr: float, w: float = DEFAULT_W) -> float:
    """Re-export of the weighted success ratio for views."""
    return weighted_success_ratio(rsr, csr, w)
