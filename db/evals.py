"""Evaluation runs and their per-(strategy, query) results, resumable and upsert-safe.

Contract: ``retrieved`` is the list of document ids a strategy returned (length k_max),
``rsr``/``csr`` are per-k scores for k = 1..k_max. Saving a result whose (run, strategy,
query) already exists replaces it, so a resumed run may safely re-save a batch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from db._common import require, to_jsonable
from db.engine import Store
from db.errors import InvalidInputError
from db.liveness import LiveRun, beat, claim_row, clear_stop_row, owns, request_stop, stop_requested
from db.models import Corpus, EmbeddingRun, EvalResult, EvalRun, Query, QuerySet, utcnow

EVAL_STATUSES = ("running", "done", "cancelled", "failed")


@dataclass(frozen=True)
class EvalRunInfo(LiveRun):
    """An evaluation run; ``n_results`` counts stored (strategy, query) results."""

    id: int
    name: str
    corpus_id: int
    query_set_id: int
    embedding_run_id: int | None
    config: dict[str, Any]
    seed: int | None
    status: str
    created_at: datetime
    finished_at: datetime | None
    timing: dict[str, Any]
    llm_usage: dict[str, Any]
    error: str
    n_results: int
    owner: str = ""
    heartbeat_at: datetime | None = None


@dataclass(frozen=True)
class EvalResultRow:
    """Result of one strategy on one query."""

    run_id: int
    strategy: str
    query_id: int
    retrieved: list[int]
    rsr: list[float]
    csr: list[float]
    details: dict[str, Any] | None


def _info(session: Session, run: EvalRun) -> EvalRunInfo:
    n = session.scalar(select(func.count()).where(EvalResult.run_id == run.id)) or 0
    return EvalRunInfo(
        id=run.id,
        name=run.name,
        corpus_id=run.corpus_id,
        query_set_id=run.query_set_id,
        embedding_run_id=run.embedding_run_id,
        config=dict(run.config or {}),
        seed=run.seed,
        status=run.status,
        created_at=run.created_at,
        finished_at=run.finished_at,
        timing=dict(run.timing or {}),
        llm_usage=dict(run.llm_usage or {}),
        error=run.error,
        n_results=n,
        owner=run.owner or "",
        heartbeat_at=run.heartbeat_at,
    )


def create_eval_run(
    store: Store,
    *,
    corpus_id: int,
    query_set_id: int,
    embedding_run_id: int | None = None,
    name: str = "",
    config: Mapping[str, Any] | None = None,
    seed: int | None = None,
    owner: str = "",
) -> EvalRunInfo:
    """Start an evaluation (status ``running``). ``config`` is any JSON (strategies, c,
    k_max, voting variant, w...); ``owner`` (:func:`db.liveness.new_owner`) claims it for the
    calling process, with a first heartbeat. Raises NotFoundError, InvalidInputError (query set or
    embedding run of another corpus)."""
    with store.session() as session:
        require(session, Corpus, corpus_id, "Corpus")
        qs = require(session, QuerySet, query_set_id, "Query set")
        if qs.corpus_id != corpus_id:
            raise InvalidInputError(f"Query set {query_set_id} belongs to another corpus.")
        if embedding_run_id is not None:
            er = require(session, EmbeddingRun, embedding_run_id, "Embedding run")
            if er.corpus_id != corpus_id:
                raise InvalidInputError(f"Embedding run {embedding_run_id} belongs to another corpus.")
        run = EvalRun(
            name=name,
            corpus_id=corpus_id,
            query_set_id=query_set_id,
            embedding_run_id=embedding_run_id,
            config=to_jsonable(dict(config or {})),
            seed=seed,
            status="running",
            timing={},
            llm_usage={},
            owner=owner,
            heartbeat_at=utcnow() if owner else None,
        )
        session.add(run)
        session.flush()
        clear_stop_row(session, EvalRun, run.id)  # a stop asked of a deleted run that had this id
        return _info(session, run)


def save_eval_results(store: Store, run_id: int, results: Sequence[Mapping[str, Any]],
                      *, fingerprints: Mapping[int, str] | None = None) -> int:
    """Store a batch of results in one transaction, replacing any with the same
    (strategy, query). Each mapping: ``strategy``, ``query_id``, ``retrieved``, ``rsr``,
    ``csr`` and optional ``details`` (JSON). Returns the number saved.

    ``fingerprints`` ({query id: fingerprint}, queries of this batch) records the version of each
    query the batch scored in the run's ``config["queries"]``, in the same transaction: a query whose
    recorded fingerprint changes (it was edited since the run scored it) also loses its results of
    the other strategies, which scored the older version, so every stored result is of the version
    its fingerprint names. Raises NotFoundError, InvalidInputError (query of another set, repeated
    key, a fingerprint of a query not in the batch)."""
    if not results:
        return 0
    with store.session() as session:
        run = require(session, EvalRun, run_id, "Evaluation run")
        rows: list[dict[str, Any]] = []
        keys: set[tuple[str, int]] = set()
        by_strategy: dict[str, list[int]] = defaultdict(list)
        for index, item in enumerate(results):
            try:
                strategy = str(item["strategy"])
                query_id = int(item["query_id"])
                row = {
                    "run_id": run_id,
                    "strategy": strategy,
                    "query_id": query_id,
                    "retrieved": [int(d) for d in to_jsonable(item["retrieved"])],
                    "rsr": [float(x) for x in to_jsonable(item["rsr"])],
                    "csr": [float(x) for x in to_jsonable(item["csr"])],
                    "details": to_jsonable(item.get("details")),
                }
            except (KeyError, TypeError, ValueError) as exc:
                raise InvalidInputError(f"Result #{index + 1} is malformed: {exc}") from exc
            if (strategy, query_id) in keys:
                raise InvalidInputError(
                    f"Result #{index + 1} repeats strategy {strategy!r} for query {query_id}."
                )
            keys.add((strategy, query_id))
            by_strategy[strategy].append(query_id)
            rows.append(row)
        query_ids = {q for _, q in keys}
        found = set(
            session.scalars(
                select(Query.id).where(Query.id.in_(query_ids), Query.query_set_id == run.query_set_id)
            )
        )
        missing = sorted(query_ids - found)
        if missing:
            raise InvalidInputError(f"Query {missing[0]} is not in this run's query set.")
        if fingerprints:
            _record_fingerprints(session, run, query_ids, fingerprints)
        for strategy, qids in by_strategy.items():
            session.execute(
                delete(EvalResult).where(
                    EvalResult.run_id == run_id,
                    EvalResult.strategy == strategy,
                    EvalResult.query_id.in_(qids),
                )
            )
        session.execute(EvalResult.__table__.insert(), rows)
        return len(rows)


def query_fingerprints(config: Mapping[str, Any] | None) -> dict[str, str]:
    """A run's recorded fingerprints, ``{str(query id): fingerprint}`` of the query versions it scored
    (``config["queries"]``); empty for a run stored before they were kept."""
    recorded = (config or {}).get("queries")
    return dict(recorded) if isinstance(recorded, dict) else {}


def _record_fingerprints(session: Session, run: EvalRun, batch: set[int], fingerprints: Mapping[int, str]) -> None:
    """Inside :func:`save_eval_results`' transaction: merge ``fingerprints`` into ``run.config["queries"]`` and
    delete every result of a query whose recorded fingerprint changes (scored from its older version)."""
    given = {int(q): str(fp) for q, fp in fingerprints.items()}
    outside = sorted(set(given) - batch)
    if outside:
        raise InvalidInputError(f"Query {outside[0]} has a fingerprint but no result in this batch.")
    config = dict(run.config or {})
    recorded = query_fingerprints(config)
    changed = [q for q, fp in given.items() if recorded.get(str(q)) != fp]
    if not changed:
        return
    stale = [q for q in changed if str(q) in recorded]
    if stale:
        session.execute(delete(EvalResult).where(EvalResult.run_id == run.id, EvalResult.query_id.in_(stale)))
    run.config = {**config, "queries": {**recorded, **{str(q): given[q] for q in changed}}}


def load_eval_results(
    store: Store, run_id: int, strategy: str | None = None
) -> list[EvalResultRow]:
    """Results of a run (optionally one strategy), ordered by strategy then query id."""
    with store.session(readonly=True) as session:
        stmt = select(EvalResult).where(EvalResult.run_id == run_id)
        if strategy is not None:
            stmt = stmt.where(EvalResult.strategy == strategy)
        rows = session.scalars(stmt.order_by(EvalResult.strategy, EvalResult.query_id))
        return [
            EvalResultRow(
                run_id=r.run_id,
                strategy=r.strategy,
                query_id=r.query_id,
                retrieved=list(r.retrieved),
                rsr=list(r.rsr),
                csr=list(r.csr),
                details=r.details,
            )
            for r in rows
        ]


def eval_llm_records(store: Store, run_ids: Sequence[int]) -> dict[int, list[tuple[str, int, dict[str, Any]]]]:
    """Per run of ``run_ids``: ``(strategy, query id, details["llm"])`` of its results that record an LLM
    expansion (only the ``details`` column is read: what a runs table needs to total LLM cost); runs without any
    are left out."""
    out: dict[int, list[tuple[str, int, dict[str, Any]]]] = {}
    if not run_ids:
        return out
    with store.session(readonly=True) as session:
        rows = session.execute(
            select(EvalResult.run_id, EvalResult.strategy, EvalResult.query_id, EvalResult.details)
            .where(EvalResult.run_id.in_(list(run_ids)), EvalResult.details.is_not(None))
            .order_by(EvalResult.run_id, EvalResult.strategy, EvalResult.query_id))
        for run_id, strategy, query_id, details in rows:
            if isinstance(details, dict) and isinstance(details.get("llm"), dict):
                out.setdefault(run_id, []).append((strategy, query_id, details["llm"]))
    return out


def completed_queries(store: Store, run_id: int, strategy: str) -> set[int]:
    """Query ids that already have a result for ``strategy`` in this run (for resuming)."""
    with store.session(readonly=True) as session:
        return set(
            session.scalars(
                select(EvalResult.query_id).where(
                    EvalResult.run_id == run_id, EvalResult.strategy == strategy
                )
            )
        )


def get_eval_run(store: Store, run_id: int) -> EvalRunInfo:
    """One evaluation run. Raises NotFoundError."""
    with store.session(readonly=True) as session:
        return _info(session, require(session, EvalRun, run_id, "Evaluation run"))


def list_eval_runs(
    store: Store, corpus_id: int | None = None, query_set_id: int | None = None
) -> list[EvalRunInfo]:
    """Evaluation runs (filtered by corpus / query set when given), newest first."""
    with store.session(readonly=True) as session:
        stmt = select(EvalRun).order_by(EvalRun.id.desc())
        if corpus_id is not None:
            stmt = stmt.where(EvalRun.corpus_id == corpus_id)
        if query_set_id is not None:
            stmt = stmt.where(EvalRun.query_set_id == query_set_id)
        return [_info(session, r) for r in session.scalars(stmt)]


def finish_eval_run(
    store: Store,
    run_id: int,
    *,
    status: str = "done",
    timing: Mapping[str, Any] | None = None,
    llm_usage: Mapping[str, Any] | None = None,
    error: str = "",
    owner: str | None = None,
) -> EvalRunInfo:
    """Set the final status (or ``running`` again to resume; then ``finished_at`` is
    cleared), and merge ``timing`` / ``llm_usage`` into the stored ones. With ``owner``, only
    while the run is still that claim's: a process that fell silent, and whose run another
    process has since claimed, changes nothing. Raises NotFoundError, InvalidInputError."""
    if status not in EVAL_STATUSES:
        raise InvalidInputError(f"Evaluation status must be one of {EVAL_STATUSES}, not {status!r}.")
    with store.session() as session:
        run = require(session, EvalRun, run_id, "Evaluation run")
        if not owns(run, owner):
            return _info(session, run)
        if status != "running":
            clear_stop_row(session, EvalRun, run_id)
        run.status = status
        run.error = error
        run.finished_at = None if status == "running" else utcnow()
        if timing is not None:
            run.timing = {**(run.timing or {}), **to_jsonable(dict(timing))}
        if llm_usage is not None:
            run.llm_usage = {**(run.llm_usage or {}), **to_jsonable(dict(llm_usage))}
        session.flush()
        return _info(session, run)


def record_eval_usage(store: Store, run_id: int, llm_usage: Mapping[str, Any], *, owner: str | None = None) -> bool:
    """Merge ``llm_usage`` into the run's stored usage (as :func:`finish_eval_run` does) while it runs, its status
    unchanged; with ``owner``, only while the run is still that claim's. True when written. Raises NotFoundError."""
    with store.session() as session:
        run = require(session, EvalRun, run_id, "Evaluation run")
        if not owns(run, owner):
            return False
        run.llm_usage = {**(run.llm_usage or {}), **to_jsonable(dict(llm_usage))}
        return True


def claim_eval_run(store: Store, run_id: int, owner: str, *, unfinished_only: bool = False,
                   n_queries: int | None = None, query_ids: Collection[int] | None = None) -> EvalRunInfo:
    """Make ``owner`` (:func:`db.liveness.new_owner`) the process that runs evaluation ``run_id``, to resume it:
    status ``running``, a fresh heartbeat. With ``unfinished_only`` (a resume) a finished (``done``) run is
    refused in the same transaction, so a run that finished since the caller looked stays as it is.
    ``n_queries`` (the number of queries the resume scores: the query set as it is now, queries added or
    deleted since the run began included) replaces ``config["n_queries"]`` in the claim's transaction, so the
    run's expected results (``n_queries`` x strategies) are right from the moment it runs again. ``query_ids``
    (the ids of those queries) drops, in the same transaction, the results of every other query (one that lost
    its text or ground truth, or was marked failed, since the run scored it) and its fingerprint in
    ``config["queries"]``, so the stored results never outnumber the expected ones. Raises NotFoundError,
    RunInProgressError (another process's heartbeat on it is recent), InvalidInputError (a finished run, with
    ``unfinished_only``; a negative ``n_queries``; ``n_queries`` given with ``query_ids`` of another length)."""
    if n_queries is not None and n_queries < 0:
        raise InvalidInputError(f"n_queries must be 0 or more, not {n_queries}.")
    keep = None if query_ids is None else {int(q) for q in query_ids}
    if keep is not None and n_queries is not None and n_queries != len(keep):
        raise InvalidInputError(f"n_queries ({n_queries}) is not the number of query_ids ({len(keep)}).")
    with store.session() as session:
        run = require(session, EvalRun, run_id, "Evaluation run")
        if unfinished_only and run.status == "done":
            raise InvalidInputError(f"Evaluation run {run_id} is finished: a finished run is not resumed.")
        claim_row(session, run, "Evaluation run", owner)
        if n_queries is not None:
            run.config = {**(run.config or {}), "n_queries": int(n_queries)}
        if keep is not None:
            _keep_only_queries(session, run, keep)
        session.flush()
        return _info(session, run)


def _keep_only_queries(session: Session, run: EvalRun, keep: set[int]) -> None:
    """Inside :func:`claim_eval_run`'s transaction: delete the run's results of queries not in ``keep`` and drop
    their fingerprints from ``config["queries"]``; ``config["n_queries"]`` becomes ``len(keep)``."""
    session.execute(delete(EvalResult).where(EvalResult.run_id == run.id, EvalResult.query_id.not_in(keep))
                    if keep else delete(EvalResult).where(EvalResult.run_id == run.id))
    config = dict(run.config or {})
    recorded = query_fingerprints(config)
    if recorded:
        config["queries"] = {q: fp for q, fp in recorded.items() if str(q).isdigit() and int(q) in keep}
    run.config = {**config, "n_queries": len(keep)}


def request_eval_stop(store: Store, run_id: int) -> bool:
    """Ask whichever process runs evaluation ``run_id`` to stop it after its current batch (it stores ``cancelled``,
    resumable); returns whether it was running (else there is nothing to stop)."""
    return request_stop(store, EvalRun, run_id)


def eval_stop_requested(store: Store, run_id: int) -> bool:
    """Whether a stop of evaluation ``run_id`` was asked and not yet carried out."""
    return stop_requested(store, EvalRun, run_id)


def beat_eval_run(store: Store, run_id: int, owner: str) -> bool:
    """Store a fresh heartbeat on evaluation ``run_id`` while it is ``running`` and ``owner``'s; returns
    whether it was (:func:`db.liveness.beat_row`)."""
    return beat(store, EvalRun, run_id, owner)


def link_eval_index(store: Store, run_id: int, embedding_run_id: int) -> EvalRunInfo:
    """Record the embedding run (index) an evaluation searched. Raises NotFoundError,
    InvalidInputError (an index of another corpus)."""
    with store.session() as session:
        run = require(session, EvalRun, run_id, "Evaluation run")
        index = require(session, EmbeddingRun, embedding_run_id, "Embedding run")
        if index.corpus_id != run.corpus_id:
            raise InvalidInputError(f"Embedding run {embedding_run_id} belongs to another corpus.")
        run.embedding_run_id = embedding_run_id
        session.flush()
        return _info(session, run)


def runs_with_results_for(store: Store, query_id: int) -> list[int]:
    """Ids of the evaluation runs that hold results for this query (they lose them when it is deleted)."""
    with store.session(readonly=True) as session:
        return list(session.scalars(select(EvalResult.run_id).where(EvalResult.query_id == query_id)
                                    .distinct().order_by(EvalResult.run_id)))


def delete_eval_run(store: Store, run_id: int) -> None:
    """Delete an evaluation run and its results. Raises NotFoundError."""
    with store.session() as session:
        require(session, EvalRun, run_id, "Evaluation run")
        session.execute(delete(EvalRun).where(EvalRun.id == run_id))
