"""Evaluation runs joined with the store: start, resume and stop a run (resumable, cancellable).

Reading a stored run back is :mod:`services.workflows.eval_results`; its LLM cost tables
:mod:`~services.workflows.eval_costs`, its downloads :mod:`~services.workflows.eval_exports`, comparing runs
:mod:`~services.workflows.eval_comparison`, layer sweeps :mod:`~services.workflows.eval_sweeps`, and a run's
LLM expansions and usage :mod:`~services.workflows.eval_expansions`.

:func:`run_evaluation` scores retrieval strategies on a stored query set of a stored corpus and
writes every (strategy, query) result - the retrieved document ids (database ids, length
``k_max``) and the RSR / CSR for every k = 1..k_max - into ``db`` in batches, each batch in its
own transaction. A run records its full configuration, seed and timings. Resuming (same call
with ``run_id``) skips the queries ``db.completed_queries`` already lists per strategy, so a
cancel or a crash loses at most one batch.

A run records the fingerprint of each query it scored (:func:`query_fingerprint`, ``config["queries"]``), so that
the views name the queries edited after it (:func:`~services.workflows.eval_results.edited_note`). A resume scores
the query set as it is when the resume starts: a query edited since the run scored it (:func:`edited_since`) is
scored again for every strategy, and each batch stores its results together with the fingerprints of the versions
it scored, in one transaction that also drops the query's older results of the other strategies
(:func:`db.save_eval_results`). So every stored result is of the version its fingerprint names, a stop at any point
keeps that true, and the edited note of a run that was resumed names only the queries edited after that resume.
(Refusing the resume instead would leave a stopped run that can never be finished once one of its queries is
corrected.) A finished (``done``) run is never resumed (:func:`finished_run_message`): it is the record analysts
compare against, so a query edited after it finished leaves its results as they are, and a new run scores the query
set as it is now.

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
:func:`~services.workflows.eval_sweeps.resume_sweep` finishes the ones a stop left out
(:func:`~services.workflows.eval_sweeps.sweep_plans`).
No Streamlit here.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import db
from mrag_core.corpus_index import CorpusIndex
from mrag_core.embedding_cache import cached_embed
from mrag_core.evaluation import (
    EvaluationCancelled,
    QueryCase,
    evaluate,
)
from mrag_core.extraction import ExtractionCancelled
from mrag_core.llm_strategies import (
    LLMOptions,
    TextBatch,
    families_for,
    is_llm_strategy,
)
from mrag_core.sentence_round_robin import query_part_rows
from mrag_core.settings import DEFAULT_MODEL, VARIANTS, RetrievalSettings
from mrag_core.strategy_registry import STRATEGIES, Strategy, UnknownStrategyError, resolve_all
from services.heartbeat import Heartbeat
from services.llm.config import LLMConfig, LLMConfigError, no_endpoint_message
from services.llm_strategies import ExpansionOutcome
from services.workflows import indexing
from services.workflows.eval_expansions import add_usage, expand_queries, llm_failed_queries, usage_of_session
from services.workflows.eval_results import EvaluationInputError, query_fingerprint

ProgressFn = Callable[[str, int, int], None]
UNLABELED = "(unlabeled)"
DEFAULT_BATCH = 64

__all__ = [
    "active_runs",
    "edited_since",
    "evaluable_queries",
    "finished_run_message",
    "resume_evaluation",
    "run_evaluation",
    "status_label",
    "stop_runs",
    "validate_request",
]


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


def loaded_model(model_name: str, lm: Any | None) -> Any:
    if lm is not None:
        return lm
    from mrag_core.models.loader import ModelLoadError, load_model

    try:
        return load_model(model_name)
    except ModelLoadError as exc:
        raise EvaluationInputError(str(exc)) from exc


USAGE_EVERY_S = 5.0  # while expanding, a run's LLM usage so far is stored at most this often (seconds)


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
    lm = loaded_model(model_name, lm)
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
        session = usage_of_session(expanded, endpoint, stopped)
        return add_usage(prior_usage, session) if session else None

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
                todo[s] -= llm_failed_queries(store, run_id, s)
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
                    expand_queries(endpoint, store, families, wanted, options, stage, cancel, expanded, save_usage,
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
