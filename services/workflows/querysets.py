"""Query sets joined with the store: generate (LLM or offline, resumable), write by hand, import,
review, regenerate/edit, export. No Streamlit here.

Generation follows the MRAG benchmark construction: :func:`services.querygen.plan_queries`
picks, per aspect count, documents of distinct categories (labelled documents only, effective
labels); each plan becomes one story (the multi-aspect query) via
:func:`services.querygen.generate_queries` - an LLM when a client is given, else the
deterministic offline composer (the set's ``source`` says which). Every outcome is stored in
the order generated: ``ok`` and ``flagged`` (a story missing a title) as queries with text,
``failed`` with no text and the error - never as a usable query. Ground truth = the plan's
documents (kept on failed rows too, so they can be regenerated).

Resume: plans are a pure function of (documents, counts, per-count, seed), saved in the set's
``params``; a plan is done when a stored query has exactly its documents (no document is used
twice in a set, so this identifies the plan). Each batch is saved in one transaction. A resume
also asks again for the Fusion sub-queries of stored stories whose Fusion request failed or was
not sent (flagged, no sub-queries; :func:`needs_fusion`): only that request, the story is kept. A hand edit of
such a story keeps that flag reason while it has no sub-queries (:func:`edit_query`).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

import db
from mrag_core.benchmark import (
    Article,
    BenchmarkFormatError,
    BenchQuery,
    read_query_rows,
    resolve_ground_truth,
)
from mrag_core.names import fold_topic
from mrag_core.wording import counted
from services.export import file_stem
from services.heartbeat import holding_lease
from services.ingest.benchmarks import topic_of_source
from services.llm.breaker import Breaker
from services.querygen import (
    OFFLINE_GENERATOR,
    DocRef,
    FusionRepair,
    GeneratedQuery,
    QueryPlan,
    SamplingError,
    ask_fusion_again,
    fusion_request_failed,
    generate_queries,
    missing_titles,
    plan_queries,
    regenerate_one,
)
from services.querygen.generate import fusion_failure_reason, llm_generator, split_fusion_reason, written_by_llm

ProgressFn = Callable[[int, int], None]
DEFAULT_BATCH = 8

__all__ = [
    "GenerationReport",
    "GenerationTodo",
    "ImportReport",
    "QuerySetError",
    "add_manual_query",
    "add_manual_query_to_new_set",
    "edit_query",
    "export_benchmark_json",
    "export_file_name",
    "generate_query_set",
    "generation_todo",
    "import_benchmark_queries",
    "import_issues",
    "import_problems",
    "max_aspects",
    "needs_fusion",
    "regenerate_query",
    "review_frame",
    "set_work_in_progress",
    "wants_fusion",
]


class QuerySetError(ValueError):
    """A query-set request cannot be done (message is shown as is)."""


@dataclass(frozen=True)
class GenerationReport:
    """Outcome of one :func:`generate_query_set` call (counts are for this call only, except
    ``fusion_missing``). ``fusion_asked`` = stored stories whose Fusion sub-queries were asked for again,
    ``fusion_made`` = how many of them got sub-queries; ``fusion_missing`` = queries of the set that still
    have no sub-queries because their Fusion request failed or was not sent (a resume asks for them)."""

    query_set_id: int
    planned: int
    done_before: int
    ok: int
    flagged: int
    failed: int
    cancelled: bool
    offline: bool
    warnings: list[str] = field(default_factory=list)
    fusion_asked: int = 0
    fusion_made: int = 0
    fusion_missing: int = 0

    @property
    def plans_left(self) -> int:
        """Planned queries this call did not get to (stopped before them)."""
        return self.planned - self.done_before - self.ok - self.flagged - self.failed

    @property
    def remaining(self) -> int:
        """What a resume still has to do: :attr:`plans_left` plus the queries without their Fusion sub-queries
        (``fusion_missing``)."""
        return self.plans_left + self.fusion_missing

    def left_text(self) -> str:
        """What is left, in words (:func:`left_text`)."""
        return left_text(self.plans_left, self.fusion_missing)


@dataclass(frozen=True)
class GenerationTodo:
    """Where a generated set stands: ``planned`` queries, ``usable`` stored with a story (ok / flagged),
    ``failed`` stored without one, ``fusion`` stored stories without their Fusion sub-queries because that
    request failed or was not sent. A resume generates the ``planned - usable`` plans (failed rows replaced)
    and asks only for the sub-queries of the ``fusion`` ones (``missing`` in all)."""

    planned: int
    usable: int
    failed: int
    fusion: int

    @property
    def missing(self) -> int:
        """Queries a resume works on: plans without a usable query, plus stories without their sub-queries."""
        return max(self.planned - self.usable, 0) + self.fusion

    def resume_text(self) -> str:
        """What a resume does beyond the plans not stored, in words: ``"1 failed, asked again; 2 without their
        Fusion sub-queries, asked for again with their stories kept"``; empty when nothing."""
        parts = [f"{self.failed} failed, asked again"] if self.failed else []
        if self.fusion:
            one = self.fusion == 1
            parts.append(f"{self.fusion} without {'its' if one else 'their'} Fusion sub-queries, asked for again "
                         f"with {'its story' if one else 'their stories'} kept")
        return "; ".join(parts)


def left_text(plans_left: int, fusion_missing: int) -> str:
    """What a resume has left to do, in words: ``"2 queries to generate and the Fusion sub-queries of 1 query to
    ask for again (its story is kept)"``; ``"nothing"`` when both are 0."""
    parts = [f"{counted(plans_left, 'query', 'queries')} to generate"] if plans_left else []
    if fusion_missing:
        one = fusion_missing == 1
        parts.append(f"the Fusion sub-queries of {counted(fusion_missing, 'query', 'queries')} to ask for again "
                     f"({'its story is' if one else 'their stories are'} kept)")
    return " and ".join(parts) or "nothing"


@dataclass(frozen=True)
class ImportReport:
    """Outcome of :func:`import_benchmark_queries`: ``unresolved`` = (1-based number among the
    imported queries, topic) of topics that match no document; ``ambiguous`` = (number, topic, how
    many documents have that title) of topics that name several documents with nothing to tell them
    apart; ``skipped`` = (location in the file, problem) of rows left out; ``locations[i]`` = where
    imported query ``i + 1`` was in the file; ``notes`` = how a file not in UTF-8 was read (its encoding, guessed)
    and ``file_name`` the name the file was read under."""

    query_set_id: int
    n_queries: int
    n_flagged: int
    unresolved: list[tuple[int, str]]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)
    ambiguous: list[tuple[int, str, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    file_name: str = ""


def _labelled_docs(store: db.Store, corpus_id: int) -> list[db.DocumentRow]:
    return [d for d in db.list_documents(store, corpus_id, limit=None).items if d.label]


def max_aspects(store: db.Store, corpus_id: int) -> int:
    """The largest possible aspect count: the number of distinct labels among labelled documents."""
    return len({d.label for d in _labelled_docs(store, corpus_id)})


def _plans(docs: Sequence[db.DocumentRow], counts: Sequence[int], per_count: int, seed: int) -> list[QueryPlan]:
    try:
        return plan_queries([DocRef(str(d.id), d.title, str(d.label)) for d in docs], list(counts), per_count, seed)
    except SamplingError as exc:
        raise QuerySetError(str(exc)) from exc


def _key(g: GeneratedQuery) -> tuple[int, ...]:
    """The ground truth a generated query was planned with (what identifies its plan among the stored queries)."""
    return tuple(int(d) for d in g.plan.doc_ids)


def _row(g: GeneratedQuery) -> dict[str, Any]:
    error = g.error or ""
    if g.missing_titles:
        error = (error + "; " if error else "") + "missing titles: " + ", ".join(g.missing_titles)
    return {
        "text": g.text or "", "ground_truth": [int(d) for d in g.plan.doc_ids], "n_aspects": g.plan.n_aspects,
        "status": g.status, "fusion": list(g.fusion), "generator": g.generator, "error": error,
    }


def generate_query_set(
    store: db.Store,
    *,
    corpus_id: int,
    name: str = "",
    aspect_counts: Sequence[int] = (1, 2, 3),
    per_count: int = 5,
    seed: int = 0,
    client: Any | None = None,
    want_fusion: bool = True,
    n_fusion: int = 3,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    query_set_id: int | None = None,
    batch_size: int = DEFAULT_BATCH,
) -> GenerationReport:
    """Create a generated query set (or, with ``query_set_id``, resume one with its stored settings).

    ``client`` is an :class:`~services.llm.client.LLMClient` or None for the offline composer.
    ``progress(done, total)`` counts plans over the whole set. Raises :class:`QuerySetError` for
    an impossible request (nothing is created then).
    """
    if query_set_id is not None:
        qs = db.get_query_set(store, query_set_id)
        p = qs.params
        corpus_id = qs.corpus_id
        aspect_counts, per_count, seed = list(p["aspect_counts"]), int(p["per_count"]), int(p["seed"])
        want_fusion, n_fusion = bool(p.get("want_fusion", False)), int(p.get("n_fusion", 3))
    docs = _labelled_docs(store, corpus_id)
    if not docs:
        raise QuerySetError("The corpus has no labelled document: label documents first "
                            "(every aspect needs a category).")
    plans = _plans(docs, aspect_counts, per_count, seed)
    warnings = list(getattr(plans, "warnings", []))
    if not plans:
        raise QuerySetError("No query can be planned: " + (" ".join(warnings) or "check the aspect counts."))
    offline = client is None
    if query_set_id is None:
        cleaned = (name or "").strip()
        if not cleaned:
            raise QuerySetError("Give the query set a name.")
        generator = OFFLINE_GENERATOR if offline else llm_generator(client.config.model)
        try:
            qs = db.create_query_set(
                store, corpus_id, cleaned, source="generated-offline" if offline else "generated-llm",
                description=("Offline composer (no LLM): extracts of the documents' salient sentences."
                             if offline else f"Stories written by {generator}."),
                params={"aspect_counts": list(aspect_counts), "per_count": per_count, "seed": seed,
                        "want_fusion": want_fusion, "n_fusion": n_fusion, "generator": generator,
                        "planned": len(plans),
                        "corpus_version": db.get_corpus(store, corpus_id).version},
            )
        except (db.DuplicateError, db.InvalidInputError) as exc:
            raise QuerySetError(str(exc)) from exc
        query_set_id = qs.id
    cancel = cancel if cancel is not None else threading.Event()
    try:  # one process generates into a set at a time (the app, mrag-studio generate)
        with holding_lease(store, generation_lease(query_set_id), "Query generation for set", query_set_id, cancel,
                           title=qs.name):
            return _generate_missing(store, query_set_id, plans, docs, client=client, want_fusion=want_fusion,
                                     n_fusion=n_fusion, progress=progress, cancel=cancel, batch_size=batch_size,
                                     offline=offline, warnings=warnings)
    except db.RunInProgressError as exc:  # raised by the lease, before anything is generated
        raise QuerySetError(str(exc)) from exc


def _without_fusion_failure(error: str) -> str | None:
    """``error`` without its reason that the Fusion request failed or was not sent
    (:func:`~services.querygen.generate.split_fusion_reason`, :func:`~services.querygen.fusion_request_failed`),
    the other reasons kept in order; ``None`` when it has no such reason (or only that the LLM's answer had no
    usable line, which asking again would not mend)."""
    found = split_fusion_reason(error)
    return found[1] if found is not None and fusion_request_failed(found[0]) else None


def wants_fusion(info: db.QuerySetInfo) -> bool:
    """Whether query set ``info`` wants Fusion sub-queries for its stories: it was generated with them (its
    ``params``). A hand-written or imported set never does."""
    return info.source.startswith("generated") and bool(info.params.get("want_fusion", False))


def needs_fusion(query: db.QueryRow, want_fusion: bool) -> bool:
    """Whether a resume asks again for ``query``'s Fusion sub-queries: its set wants them (``want_fusion``,
    :func:`wants_fusion`), it has a story that an LLM wrote (perhaps edited by hand since) and no sub-queries,
    and its flag does not say that the LLM's answer had no usable line (asked already; asking again would not
    mend it). Its flag says so when the request failed or was not sent (:func:`edit_query` keeps that reason).
    Hand-written and imported queries never: whatever their reasons say, no Fusion request was made for them."""
    if not (want_fusion and query.status != "failed" and query.text.strip() and not query.fusion
            and written_by_llm(query.generator)):
        return False
    found = split_fusion_reason(query.error or "")
    return found is None or fusion_request_failed(found[0])


def generation_todo(store: db.Store, info: db.QuerySetInfo) -> GenerationTodo:
    """Where generated set ``info`` stands (:class:`GenerationTodo`); all 0 for a set that was not generated."""
    planned = int(info.params.get("planned", 0)) if info.source.startswith("generated") else 0
    if not planned:
        return GenerationTodo(0, 0, 0, 0)
    queries = db.list_queries(store, info.id)
    want = wants_fusion(info)
    usable = sum(1 for q in queries if q.status != "failed")
    return GenerationTodo(planned, usable, len(queries) - usable, sum(needs_fusion(q, want) for q in queries))


def generation_missing(store: db.Store, info: db.QuerySetInfo) -> int:
    """How many of a generated set's planned queries a resume works on: not stored yet or failed (generated),
    or stored without their Fusion sub-queries because that request failed (only those asked for again); 0 for
    a set that was not generated."""
    return generation_todo(store, info).missing


def generation_lease(query_set_id: int) -> str:
    """The name of the lease (:func:`db.take_lease`) a generation into ``query_set_id`` holds while it runs."""
    return f"querygen:{int(query_set_id)}"


def set_work_in_progress(store: db.Store, query_set_id: int) -> list[str]:
    """What some process is doing to query set ``query_set_id`` now, as its heartbeats say (:mod:`db.liveness`):
    a query generation into it (since when, by which process) and evaluation runs scoring it (by name). Deleting
    the set under them would make them fail half-way; empty when nothing runs."""
    out = [f"{db.work_title('evaluation run', r.id, r.name)} is scoring it ({r.process})"
           for r in db.list_eval_runs(store, query_set_id=query_set_id) if r.live]
    lease = db.lease_info(store, generation_lease(query_set_id))
    if lease is not None:
        out.insert(0, f"queries are being generated into it ({lease.describe()})")
    return out


def _generate_missing(store: db.Store, query_set_id: int, plans: list[QueryPlan], docs: list[db.DocumentRow], *,
                      client: Any | None, want_fusion: bool, n_fusion: int, progress: ProgressFn | None,
                      cancel: threading.Event, batch_size: int, offline: bool, warnings: list[str]
                      ) -> GenerationReport:
    """:func:`generate_query_set`'s body once the set exists and its lease is held: first ask again for the
    Fusion sub-queries of stored stories that have none because that request failed (:func:`needs_fusion`;
    with an LLM only, the stories kept), then generate the plans that have no stored query yet, or only a
    failed one (which is replaced), a batch per transaction. Progress counts plans; a story waiting for its
    sub-queries counts as done once they were asked for."""
    stored = db.list_queries(store, query_set_id)
    done_keys = {tuple(q.ground_truth) for q in stored if q.status != "failed"}
    failed_ids = {tuple(q.ground_truth): q.id for q in stored if q.status == "failed"}  # asked again
    plan_keys = {tuple(int(d) for d in plan.doc_ids) for plan in plans}
    done = {i for i, plan in enumerate(plans) if tuple(int(d) for d in plan.doc_ids) in done_keys}
    if any(tuple(q.ground_truth) not in plan_keys for q in stored):
        warnings.append("Some stored queries match no plan (the corpus changed since generation started).")
    repairs = [q for q in stored if needs_fusion(q, want_fusion)]
    breaker = Breaker(cancel) if client is not None else None  # one for all batches: see services.llm.breaker
    total = len(plans)
    finished = len(done) - sum(tuple(q.ground_truth) in plan_keys for q in repairs)
    if progress is not None:
        progress(finished, total)
    asked = fusion_made = 0
    cancelled = False
    if repairs and client is None:
        warnings.append(f"{counted(len(repairs), 'query has', 'queries have')} no Fusion sub-queries: they are "
                        "asked for from the LLM, and no LLM endpoint is configured. Configure one, then resume.")
    elif repairs:
        asked, fusion_made, finished, cancelled = _repair_fusion(
            store, repairs, client=client, n_fusion=n_fusion, progress=progress, cancel=cancel, breaker=breaker,
            batch_size=batch_size, plan_keys=plan_keys, finished=finished, total=total, warnings=warnings)
    docs_by_id = {str(d.id): d for d in docs}
    todo = [] if cancelled else [i for i in range(len(plans)) if i not in done]
    counts = {"ok": 0, "flagged": 0, "failed": 0}
    for start in range(0, len(todo), batch_size):
        if cancel.is_set():
            cancelled = True
            break
        batch = set(todo[start:start + batch_size])
        skip = [i for i in range(len(plans)) if i not in batch]
        base = finished

        def batch_progress(d: int, _t: int, _base: int = base) -> None:
            if progress is not None:
                progress(_base + d, total)

        results = generate_queries(plans, docs_by_id, client=client, want_fusion=want_fusion, n_fusion=n_fusion,
                                   skip=skip, cancel=cancel, progress=batch_progress, breaker=breaker)
        fresh = [g for g in sorted(results, key=lambda g: g.index) if _key(g) not in failed_ids]
        if fresh:
            db.add_queries(store, query_set_id, [_row(g) for g in fresh])
        for g in results:  # a plan whose stored query had failed: that row gets the new answer
            if _key(g) in failed_ids:
                row = _row(g)
                db.update_query(store, failed_ids[_key(g)], text=row["text"] or None, status=row["status"],
                                fusion=row["fusion"], error=row["error"])
        for g in results:
            counts[g.status] += 1
        finished += len(results)
        stopped = breaker is not None and breaker.tripped and start + batch_size < len(todo)  # plans are left
        if len(results) < len(batch) or stopped:
            cancelled = True
            _stopped_by_endpoint(breaker, warnings)
            break
    missing = sum(needs_fusion(q, want_fusion) for q in db.list_queries(store, query_set_id))
    return GenerationReport(query_set_id, len(plans), len(done), counts["ok"], counts["flagged"], counts["failed"],
                            cancelled, offline, warnings, fusion_asked=asked, fusion_made=fusion_made,
                            fusion_missing=missing)


def _stopped_by_endpoint(breaker: Breaker | None, warnings: list[str]) -> None:
    """Add the warning that the run stopped because the endpoint failed for every request (when it did)."""
    if breaker is not None and breaker.tripped:
        warnings.append(f"Stopped: the endpoint failed for every request ({breaker.error}); fix it, then resume.")


def _repaired_row(query: db.QueryRow, repair: FusionRepair) -> dict[str, Any]:
    """``query``'s new fusion, status and error once its Fusion sub-queries were asked for again: the reason that
    the request failed is replaced by what is wrong with the new answer (nothing when it gave the sub-queries
    asked for), the other reasons (missing titles, a story cut off) are kept; ``ok`` when no reason is left."""
    found = split_fusion_reason(query.error or "")
    kept = found[1] if found is not None else (query.error or "")
    before, sep, after = kept.partition("missing titles: ")
    reasons = [before.removesuffix("; "), *repair.problems, sep + after]
    error = "; ".join(r for r in reasons if r)
    return {"fusion": list(repair.fusion), "status": "flagged" if error else "ok", "error": error}


def _repair_fusion(store: db.Store, repairs: Sequence[db.QueryRow], *, client: Any, n_fusion: int,
                   progress: ProgressFn | None, cancel: threading.Event, breaker: Breaker | None, batch_size: int,
                   plan_keys: set[tuple[int, ...]], finished: int, total: int, warnings: list[str]
                   ) -> tuple[int, int, int, bool]:
    """Ask for the Fusion sub-queries of ``repairs`` again (one request each, a batch at a time) and store each
    answer on its row (:func:`_repaired_row`). Returns (how many were asked for, how many got sub-queries,
    ``finished`` plus the asked rows that are plans, whether the run stopped with some not asked for: ``cancel``
    set, or the endpoint failed for every request)."""
    asked = made = 0
    for start in range(0, len(repairs), batch_size):
        if cancel.is_set():
            return asked, made, finished, True
        batch = list(repairs[start:start + batch_size])
        base = finished
        in_plans = [tuple(q.ground_truth) in plan_keys for q in batch]

        def batch_progress(d: int, _t: int, _base: int = base, _n: int = sum(in_plans)) -> None:
            if progress is not None:
                progress(_base + min(d, _n), total)

        results = ask_fusion_again([q.text for q in batch], client=client, n_fusion=n_fusion, cancel=cancel,
                                   progress=batch_progress, breaker=breaker)
        for r in results:
            row = _repaired_row(batch[r.index], r)
            db.update_query(store, batch[r.index].id, fusion=row["fusion"], status=row["status"], error=row["error"])
            asked += 1
            made += bool(r.fusion)
            finished += in_plans[r.index]
        tripped = breaker is not None and breaker.tripped
        if len(results) < len(batch) or (tripped and start + batch_size < len(repairs)):
            _stopped_by_endpoint(breaker, warnings)
            return asked, made, finished, True
    return asked, made, finished, False


def _docs(store: db.Store, ids: Sequence[int]) -> list[db.DocumentRow]:
    return db.get_documents(store, ids)


def regenerate_query(store: db.Store, query_id: int, *, client: Any | None = None, want_fusion: bool = True,
                     n_fusion: int = 3) -> db.QueryRow:
    """Write the story of a (flagged / failed) query again from its ground-truth documents.

    A successful answer replaces text, fusion, status and error; a failed one keeps the old
    text (a failed row stays failed) and records the error."""
    q = db.get_query(store, query_id)
    if not q.ground_truth:
        raise QuerySetError("This query has no ground-truth documents to write a story about.")
    docs = _docs(store, q.ground_truth)
    plan = QueryPlan(len(docs), tuple(str(d.id) for d in docs))
    g = regenerate_one(plan, {str(d.id): d for d in docs}, client=client, want_fusion=want_fusion, n_fusion=n_fusion)
    row = _row(g)
    if g.status == "failed":
        return db.update_query(store, query_id, error=row["error"])
    return db.update_query(store, query_id, text=row["text"], status=row["status"], fusion=row["fusion"],
                           error=row["error"])


def _shared_category(docs: Sequence[db.DocumentRow]) -> str:
    """Why ground truth ``docs`` is not one document per category (empty when it is): the first two labelled
    documents that share a category. Documents of a legal / accident topic layout (whose ground truth is every
    document of a topic) are left out of the check."""
    first: dict[str, db.DocumentRow] = {}
    for d in docs:
        if not d.label or topic_of_source(d.source) is not None:
            continue
        if d.label in first:
            return (f"ground-truth documents {first[d.label].title!r} and {d.title!r} share the category {d.label!r} "
                    "(each aspect should come from its own category)")
        first[d.label] = d
    return ""


def _status_for(text: str, docs: Sequence[db.DocumentRow]) -> tuple[str, str]:
    """``ok``, or ``flagged`` with the reasons: ground-truth titles the text does not mention, two ground-truth
    documents of one category (:func:`_shared_category`)."""
    missing = missing_titles(text, [d.title for d in docs])
    reasons = ["missing titles: " + ", ".join(missing)] if missing else []
    if shared := _shared_category(docs):
        reasons.append(shared)
    return ("flagged", "; ".join(reasons)) if reasons else ("ok", "")


def _checked_status(store: db.Store, corpus_id: int, text: str, ground_truth: Sequence[int]) -> tuple[str, str]:
    """Validate a hand-written query (non-empty text, at least one ground-truth document, all of corpus
    ``corpus_id``) and give its status (:func:`_status_for`): ``ok`` when every ground-truth title is mentioned and
    no two documents share a category, else ``flagged`` with the reasons. Raises :class:`QuerySetError`."""
    if not text.strip():
        raise QuerySetError("The query text must not be empty.")
    if not ground_truth:
        raise QuerySetError("Pick at least one ground-truth document.")
    docs = _docs(store, ground_truth)
    found = {d.id for d in docs if d.corpus_id == corpus_id}
    strays = [d for d in ground_truth if d not in found]
    if strays:
        raise QuerySetError(f"Ground-truth document #{strays[0]} is not in this corpus (deleted meanwhile, or "
                            "picked in another corpus): clear the ground truth and pick it again.")
    return _status_for(text, docs)


def edit_query(store: db.Store, query_id: int, *, text: str, ground_truth: Sequence[int],
               fusion: Sequence[str] | None = None) -> db.QueryRow:
    """Hand edit: new text and ground truth, and with ``fusion`` new Fusion sub-queries (blank ones dropped;
    ``None`` keeps the stored ones). Status ``ok`` when every ground-truth title is mentioned and no two
    ground-truth documents share a category, else ``flagged`` with the reasons; and, for a story of a set that
    wants sub-queries left without any, the reason that they are missing (:func:`_missing_fusion_reason`), so
    it stays flagged, a resume asks for them and Fusion RAG never runs without them unsaid."""
    query = db.get_query(store, query_id)
    info = db.get_query_set(store, query.query_set_id)
    status, error = _checked_status(store, info.corpus_id, text, ground_truth)
    subs = [f.strip() for f in fusion if f.strip()] if fusion is not None else None
    if reason := _missing_fusion_reason(query, info, query.fusion if subs is None else subs):
        status, error = "flagged", "; ".join(r for r in (reason, error) if r)
    try:
        return db.update_query(store, query_id, text=text.strip(), ground_truth=list(ground_truth),
                               n_aspects=len(ground_truth), status=status, error=error, fusion=subs)
    except db.InvalidInputError as exc:
        raise QuerySetError(str(exc)) from exc


def _missing_fusion_reason(query: db.QueryRow, info: db.QuerySetInfo, fusion: Sequence[str]) -> str:
    """The flag reason that an edit of ``query`` (of set ``info``) leaving it with sub-queries ``fusion`` keeps
    or gives; empty when it has sub-queries, when its set does not want them (:func:`wants_fusion`) or when no
    LLM wrote it (a hand-written query: no request was made). Else the stored reason that they are missing (the
    request failed or was not sent; or the LLM's answer had no usable line, which a resume does not ask again),
    or, when the stored flag has none (it was failed, or its sub-queries were removed), that they were not made:
    :func:`needs_fusion` then asks for them."""
    if fusion or not wants_fusion(info) or not written_by_llm(query.generator):
        return ""
    found = split_fusion_reason(query.error or "") if query.status != "failed" else None
    if found is not None:
        return found[0]
    return fusion_failure_reason("the story has none yet (a resume asks for them)", sent=False)


def add_manual_query(store: db.Store, query_set_id: int, *, text: str, ground_truth: Sequence[int],
                     fusion: Sequence[str] = ()) -> db.QueryRow:
    """A hand-written query with ground truth picked from the corpus (status as in :func:`edit_query`)."""
    status, error = _checked_status(store, db.get_query_set(store, query_set_id).corpus_id, text, ground_truth)
    try:
        (qid,) = db.add_queries(store, query_set_id, [{
            "text": text.strip(), "ground_truth": list(ground_truth), "n_aspects": len(ground_truth),
            "status": status, "error": error, "fusion": [f.strip() for f in fusion if f.strip()],
            "generator": "hand-written"}])
    except db.InvalidInputError as exc:
        raise QuerySetError(str(exc)) from exc
    return db.get_query(store, qid)


def add_manual_query_to_new_set(store: db.Store, corpus_id: int, name: str, *, text: str,
                                ground_truth: Sequence[int], fusion: Sequence[str] = ()) -> db.QueryRow:
    """A hand-written query (as :func:`add_manual_query`) in a new ``manual`` query set named ``name``: both or
    nothing. The query is checked before the set is made, so a query that fails its checks leaves no empty set
    behind; should storing it fail all the same (a ground-truth document deleted meanwhile), the new set is
    removed again. Raises :class:`QuerySetError` (also for an empty or taken name)."""
    _checked_status(store, corpus_id, text, ground_truth)
    try:
        qs = db.create_query_set(store, corpus_id, name, source="manual")
    except (db.DuplicateError, db.InvalidInputError, db.NotFoundError) as exc:
        raise QuerySetError(str(exc)) from exc
    try:
        return add_manual_query(store, qs.id, text=text, ground_truth=ground_truth, fusion=fusion)
    except Exception:
        db.delete_query_set(store, qs.id)  # the set was made for this query only
        raise


def _topic_index(docs: Sequence[db.DocumentRow]) -> dict[str, list[int]]:
    """Topic name (bare, ``<category>_<topic>``, ``<category>/<topic>``; loosely normalised) ->
    ids of the documents imported from that topic of a legal / accident layout (their ``source``
    ends with ``" topic <name>"``)."""
    index: dict[str, list[int]] = {}
    for d in docs:
        topic = topic_of_source(d.source)
        if topic is None:
            continue
        label = d.label or ""
        bare = topic[len(label) + 1:] if label and topic.startswith(label + "_") else topic
        for alias in {topic, bare, f"{label}_{bare}", f"{label}/{bare}"}:
            ids = index.setdefault(fold_topic(alias), [])
            if d.id not in ids:
                ids.append(d.id)
    return index


def _read_queries(
    source: str | Path | bytes, file_name: str
) -> tuple[list[tuple[str, BenchQuery]], list[tuple[str, str]], str, list[str]]:
    """(location, query) rows, (location, problem) rows, the file's name and how it was read when not UTF-8 (a
    UTF-16 or Windows-1252 file, as a document import reads it); raises QuerySetError."""
    if isinstance(source, (bytes, bytearray)):
        data, name = bytes(source), file_name
    else:
        path = Path(source)
        if not path.is_file():
            raise QuerySetError(f"{path}: file not found")
        data, name = path.read_bytes(), str(path)
    notes: list[str] = []
    try:
        rows, problems = read_query_rows(data, name, notes)
    except BenchmarkFormatError as exc:
        raise QuerySetError(str(exc)) from exc
    if not rows:
        where, what = problems[0] if problems else (name, "contains no queries")
        raise QuerySetError(f"{name}: no query can be imported; {where}: {what}")
    return rows, problems, name, notes


def import_benchmark_queries(store: db.Store, corpus_id: int, source: str | Path | bytes, *, name: str,
                             file_name: str = "queries.json") -> ImportReport:
    """Import a query file into a new set of ``corpus_id``, row by row.

    Formats (see :func:`mrag_core.benchmark.read_query_rows`): the MRAG benchmark query JSON /
    JSONL (optionally bz2/gzip) of ``{topics | related, text, fusion}``, or a CSV / TSV with
    ``text`` and ``topics`` (titles separated by ``|``) columns; both may carry what
    :func:`export_benchmark_json` writes besides (per topic ``categories`` and ``document_ids``,
    the query's ``status`` and ``reason``). A topic resolves to a document by title (the Wikipedia
    benchmark; case-insensitive fallback), documents sharing a title told apart by the document id
    (when it still names a document of that title in this corpus) or the category
    (:func:`mrag_core.benchmark.resolve_ground_truth`); otherwise to every document imported from a
    legal / accident topic of that name (topic-level ground truth).

    Bad rows are skipped and listed in ``skipped``. A query is imported ``flagged``, the reasons in
    ``error``, when the file says it is flagged (its reason kept), when a topic matches no document
    (listed in ``unresolved``) or when it names several documents with nothing to tell them apart
    (listed in ``ambiguous``; none of them is taken). Raises :class:`QuerySetError` for an
    unreadable file, a file without one good row, or a taken name; nothing is written then."""
    parsed, problems, shown_name, notes = _read_queries(source, file_name)
    queries = [q for _, q in parsed]
    docs = db.list_documents(store, corpus_id, limit=None).items
    res = resolve_ground_truth(queries, [Article(d.title, d.text, d.label or "") for d in docs],
                               [d.id for d in docs])
    topics = _topic_index(docs)
    ambiguous: dict[int, list[tuple[str, int]]] = {}
    for qi, topic, n in res.ambiguous:
        ambiguous.setdefault(qi, []).append((topic, n))
    by_query: dict[int, list[str]] = {}
    topic_docs: dict[int, list[int]] = {}
    for qi, topic in res.unresolved:
        if any(topic == t for t, _ in ambiguous.get(qi, [])):
            continue  # a title of several documents: not a legal / accident topic name
        hit = topics.get(fold_topic(topic))
        if hit:
            topic_docs.setdefault(qi, []).extend(hit)
        else:
            by_query.setdefault(qi, []).append(topic)
    rows = []
    for qi, (q, idx) in enumerate(zip(queries, res.doc_indices)):
        gt = list(dict.fromkeys([*(docs[i].id for i in idx), *topic_docs.get(qi, [])]))
        reasons = _import_reasons(q, by_query.get(qi, []), ambiguous.get(qi, []))
        rows.append({"text": q.text, "ground_truth": gt, "n_aspects": q.n_aspects, "fusion": list(q.fusion),
                     "status": "flagged" if reasons or not gt else "ok", "generator": "imported",
                     "error": "; ".join(reasons)})
    try:
        qs = db.create_query_set(store, corpus_id, name, source="imported",
                                 description=f"Imported from {Path(shown_name).name}", params={"file": shown_name})
    except (db.DuplicateError, db.InvalidInputError) as exc:
        raise QuerySetError(str(exc)) from exc
    try:
        db.add_queries(store, qs.id, rows)
    except Exception:
        db.delete_query_set(store, qs.id)
        raise
    return ImportReport(qs.id, len(rows), sum(r["status"] == "flagged" for r in rows),
                        [(qi + 1, t) for qi, ts in sorted(by_query.items()) for t in ts],
                        skipped=problems, locations=[where for where, _ in parsed],
                        ambiguous=[(qi + 1, t, n) for qi, tn in sorted(ambiguous.items()) for t, n in tn],
                        notes=notes, file_name=Path(shown_name).name)


def _ambiguity(topic: str, n: int) -> str:
    return f"{n} documents are titled {topic!r} and nothing in the file tells which one is meant"


def _import_reasons(q: BenchQuery, missing: Sequence[str], ambiguous: Sequence[tuple[str, int]]) -> list[str]:
    """Why an imported query is flagged: the file's own flag (with its reason), topics that match no document,
    titles of several documents that nothing tells apart. Empty: the query is ``ok``."""
    reasons = [q.reason or "flagged in the imported file"] if q.status == "flagged" else []
    if missing:
        reasons.append("unresolved topics: " + ", ".join(missing))
    if ambiguous:
        reasons.append("ambiguous topics: " + ", ".join(_ambiguity(t, n) for t, n in ambiguous) + " (none was taken)")
    return reasons


def import_problems(report: ImportReport) -> str:
    """What went wrong in an import, in one sentence (empty when nothing did): a file not in UTF-8 (its encoding
    guessed), rows skipped, topics that match no document, topics that name several documents with nothing to tell
    them apart."""
    parts = []
    if report.notes:
        parts.append("the file is not UTF-8: its encoding was guessed; check the accented characters")
    if report.skipped:
        parts.append(f"{counted(len(report.skipped), 'row')} could not be read and "
                     f"{'was' if len(report.skipped) == 1 else 'were'} skipped")
    if report.unresolved:
        parts.append(f"{counted(len(report.unresolved), 'topic')} "
                     f"{'matches' if len(report.unresolved) == 1 else 'match'} no document of this corpus")
    if report.ambiguous:
        parts.append(f"{counted(len(report.ambiguous), 'topic')} {'names' if len(report.ambiguous) == 1 else 'name'} "
                     "several documents of one title that nothing in the file tells apart")
    text = "; ".join(parts)
    return text[:1].upper() + text[1:]


def import_issues(report: ImportReport) -> pd.DataFrame:
    """The import report row by row: how a file not in UTF-8 was read (``warning``), skipped rows (``error``), then
    the imported queries with a topic that matched no document or several that nothing told apart (``warning``,
    the query is ``flagged``), in file order."""
    rows = [{"location": report.file_name, "severity": "warning", "message": note} for note in report.notes]
    rows += [{"location": where, "severity": "error", "message": f"skipped: {what}"} for where, what in report.skipped]
    issues = [(qn, f"imported as flagged: topic {topic!r} matches no document") for qn, topic in report.unresolved]
    issues += [(qn, f"imported as flagged: {_ambiguity(topic, n)}; none was taken")
               for qn, topic, n in report.ambiguous]
    rows += [{"location": report.locations[qn - 1] if qn <= len(report.locations) else f"query {qn}",
              "severity": "warning", "message": message} for qn, message in sorted(issues, key=lambda i: i[0])]
    return pd.DataFrame(rows, columns=["location", "severity", "message"])


def review_frame(store: db.Store, query_set_id: int) -> pd.DataFrame:
    """One row per query: id, status, aspects, text, ground-truth titles and categories, generator, error."""
    queries = db.list_queries(store, query_set_id)
    ids = sorted({d for q in queries for d in q.ground_truth})
    docs = {d.id: d for d in db.get_documents(store, ids)}
    rows = []
    for q in queries:
        gt = [docs[d] for d in q.ground_truth if d in docs]
        rows.append({"id": q.id, "status": q.status, "aspects": q.n_aspects, "text": q.text,
                     "ground truth": " | ".join(d.title for d in gt),
                     "categories": " | ".join(d.label or "(unlabeled)" for d in gt),
                     "fusion": len(q.fusion), "generator": q.generator, "error": q.error})
    return pd.DataFrame(rows, columns=["id", "status", "aspects", "text", "ground truth", "categories", "fusion",
                                       "generator", "error"])


def export_file_name(name: str) -> str:
    """The download name of query set ``name``'s export: ``<name>.json`` with every run of characters other than
    ASCII letters, digits, ``_``, ``.`` and ``-`` (a ``/``, a space, a ``:``) replaced by one ``_`` and ``_`` trimmed
    from both ends (:func:`services.export.file_stem`, as the Agreement and Export page names a corpus's file);
    ``query_set.json`` when nothing is left. ``"runs/2024: v1"`` -> ``"runs_2024_v1.json"``."""
    return file_stem(name, "query_set") + ".json"


def export_benchmark_json(store: db.Store, query_set_id: int) -> str:
    """The set as an MRAG benchmark query file, ``[{"topics": [titles], "text", "fusion", ...}]`` (queries
    with text only; failed rows are left out), which imports back exactly (:func:`import_benchmark_queries`).

    Besides the benchmark's keys each query has, per topic, the document's category (``categories``;
    ``null`` when unlabelled; the benchmark keys documents by (title, label)) and its id
    (``document_ids``, used on a re-import into this database when it still names a document of that
    title), and its ``status`` (``ok`` / ``flagged``) with the ``reason`` for a flag. Readers of the
    benchmark format ignore them."""
    queries = [q for q in db.list_queries(store, query_set_id) if q.status != "failed" and q.text.strip()]
    ids = sorted({d for q in queries for d in q.ground_truth})
    docs = {d.id: d for d in db.get_documents(store, ids)}
    out = []
    for q in queries:
        gt = [docs[d] for d in q.ground_truth if d in docs]
        out.append({"topics": [d.title for d in gt], "text": q.text, "fusion": list(q.fusion),
                    "categories": [d.label or None for d in gt], "document_ids": [d.id for d in gt],
                    "status": q.status, "reason": q.error if q.status == "flagged" else ""})
    return json.dumps(out, ensure_ascii=False, indent=1)
