"""Pre-annotation, review, bulk acceptance, find-similar and agreement, joining the annotators,
the search backends and the store (no Streamlit).

Pre-annotation (:func:`preannotate`) is resumable and cancellable: it asks the store which
documents still lack an ok suggestion from the annotator's ``agent``/``model_version``
(``db.documents_without_suggestion``), annotates them in batches and stores each batch with
``db.add_suggestions`` before starting the next, so a cancel or a crash keeps every finished
batch; a stop mid-batch (Streamlit raising in the progress callback, a Ctrl+C) stores, in one transaction, the
suggestions of the batch that progress already counted. Failed suggestions are stored with ``status="failed"``
and their error, never as labels.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import numpy as np

import db
from db.errors import this_process
from mrag_core.wording import counted
from services.annotate import (
    AnnotationDoc,
    CategorySpec,
    Suggestion,
    zero_shot_annotate,
    zero_shot_identity,
)
from services.annotate.types import fold_name, validate_categories
from services.heartbeat import holding_lease
from services.llm.causes import cause_of
from services.workflows.llm_annotation import ActivityFn, LLMAnnotator

__all__ = [
    "Annotator",
    "BulkRow",
    "CategoryInUse",
    "ConfirmationNeeded",
    "MergeNeeded",
    "LLMAnnotator",
    "Neighbour",
    "PreannotateSummary",
    "add_categories",
    "ReviewItem",
    "ZeroShotAnnotator",
    "accept_rows",
    "apply_label",
    "bulk_rows",
    "confusion_table",
    "delete_category",
    "delete_impact",
    "document_name",
    "find_category",
    "highlight_keywords",
    "merge_impact",
    "merge_target",
    "next_in_queue",
    "nearest_documents",
    "parse_category_lines",
    "preannotate",
    "rename_category",
    "review_item",
    "space_vectors",
    "usage_summary",
]

ProgressFn = Callable[[int, int], None]
SuggestionFn = Callable[[Suggestion], None]


# --------------------------------------------------------------------------- annotators


class Annotator(Protocol):
    """Something that labels documents: an identity for resume plus ``annotate``."""

    agent: str
    model_version: str

    def annotate(
        self, docs: Sequence[AnnotationDoc], categories: Sequence[CategorySpec], *, cancel: threading.Event | None,
        progress: ProgressFn | None = None, on_suggestion: SuggestionFn | None = None,
        activity: ActivityFn | None = None,
    ) -> list[Suggestion]:
        """One suggestion per finished document (cancelled ones are left out). As documents finish, from the
        calling thread, it may call ``on_suggestion(suggestion)`` and then ``progress(done, len(docs))``, ``done``
        counting the suggestions handed over so far: every document ``progress`` counted has reached
        ``on_suggestion`` before, also when that ``progress`` call raises. ``activity``: its state while it waits
        (an LLM's requests in flight, :class:`~services.annotate.llm_annotator.Activity`), if it has one."""
        ...


@dataclass
class ZeroShotAnnotator:
    """Offline annotator: embedding similarity to ``"name: description"`` of each category.

    ``embed(texts) -> [n, d]`` (e.g. ``lambda t: embed_texts(lm, t).standard``).
    """

    embed: Callable[[list[str]], np.ndarray]
    model_name: str
    temperature: float = 0.05
    agent: str = field(init=False)
    model_version: str = field(init=False)

    def __post_init__(self) -> None:
        self.agent, self.model_version = zero_shot_identity(self.model_name, self.temperature)

    def annotate(
        self, docs: Sequence[AnnotationDoc], categories: Sequence[CategorySpec], *, cancel: threading.Event | None,
        progress: ProgressFn | None = None, on_suggestion: SuggestionFn | None = None,
        activity: ActivityFn | None = None,
    ) -> list[Suggestion]:
        """The batch in one embedding call (no progress and no ``on_suggestion`` within it: all or nothing)."""
        return zero_shot_annotate(
            self.embed, docs, categories, model_name=self.model_name, temperature=self.temperature,
            batch_size=max(1, len(docs)),
        )  # fmt: skip


# --------------------------------------------------------------------------- categories


def parse_category_lines(text: str, existing: Sequence[str] = ()) -> list[dict[str, str]]:
    """The categories typed as ``text``, one per non-blank line: ``name`` or ``name: description`` (split at the
    first colon; both stripped), as ``{"name", "description"}`` in the order typed.

    Raises ``ValueError`` with a message naming the line when a line has no name, a name is longer than 200
    characters, or two names (typed, or typed and one of ``existing``) differ only in case or spacing (the
    annotators could not tell them apart); a name equal to an existing one is a mistake too (it exists)."""
    folded_existing = {fold_name(name): name for name in existing}
    seen: dict[str, str] = {}
    out: list[dict[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, _, description = line.partition(":")
        name, description = " ".join(name.split()), description.strip()
        if not name:
            raise ValueError(f"Line {number} has no category name before its colon.")
        if len(name) > 200:
            raise ValueError(f"Line {number}: the category name is longer than 200 characters.")
        folded = fold_name(name)
        if folded in folded_existing:
            other = folded_existing[folded]
            raise ValueError(f"Line {number}: the corpus has a category {other!r} already"
                             + ("." if other == name else f", which differs from {name!r} only in case or spacing."))
        if folded in seen:
            raise ValueError(f"Line {number}: {name!r} is given twice (or differs from {seen[folded]!r} only in case "
                             "or spacing).")
        seen[folded] = name
        out.append({"name": name, "description": description})
    if not out:
        raise ValueError("Type at least one category name.")
    return out


def add_categories(store: db.Store, corpus_id: int, text: str) -> list[db.CategoryInfo]:
    """Add the categories typed as ``text`` (:func:`parse_category_lines`, checked against the corpus' categories)
    to the corpus in one transaction; returns them. Raises ``ValueError`` (nothing is added) or
    ``db.StoreError``."""
    existing = [c.name for c in db.list_categories(store, corpus_id)]
    return db.add_categories(store, corpus_id, parse_category_lines(text, existing))


class MergeNeeded(ValueError):
    """A rename onto a name the corpus has already (equal, or equal up to case and spacing): the categories can
    only be merged. ``into`` is that category; the message says what a merge does."""

    def __init__(self, message: str, into: db.CategoryInfo) -> None:
        super().__init__(message)
        self.into = into


class ConfirmationNeeded(ValueError):
    """A deletion of a category that labels documents (or that stored labels name), asked without confirming;
    the message says how many and what the deletion does to them."""


def find_category(store: db.Store, corpus_id: int, name: str) -> db.CategoryInfo:
    """The corpus' category called ``name`` (exactly, else the one it equals up to case and spacing when only one
    does). Raises ``ValueError`` naming the corpus' categories when there is none (or several) such."""
    categories = db.list_categories(store, corpus_id)
    exact = [c for c in categories if c.name == name]
    near = exact or [c for c in categories if fold_name(c.name) == fold_name(name)]
    if len(near) == 1:
        return near[0]
    names = ", ".join(repr(c.name) for c in categories) or "none"
    if near:
        spellings = ", ".join(repr(c.name) for c in near)
        raise ValueError(f"{name!r} matches several categories up to case or spacing ({spellings}); give its exact "
                         "spelling.")
    raise ValueError(f"The corpus has no category {name!r} (its categories: {names}).")


class CategoryInUse(db.StoreError):
    """A category change refused because a pre-annotation of the corpus runs now: it stores its suggestions under
    the corpus' categories, so deleting or merging one under it would abort it. The message says which run, where
    and since when, and what to do."""


def _while_preannotating(store: db.Store, corpus_id: int) -> db.LeaseRef:
    """The pre-annotation lease of the corpus, which a deletion or merge of one of its categories checks."""
    return db.LeaseRef(preannotation_lease(corpus_id), "Pre-annotation of corpus", corpus_id,
                       title=db.get_corpus(store, corpus_id).name)


def _in_use(exc: db.LeaseHeldError, verb: str, name: str) -> CategoryInUse:
    where = db.process_of(exc.owner)
    held = ("in this app" if where == this_process()
            else f"in another process ({where}, last heard from {exc.seconds_ago:.0f} s ago)")
    since = f", started {exc.started_at:%Y-%m-%d %H:%M:%S} UTC" if exc.started_at is not None else ""
    return CategoryInUse(
        f"Cannot {verb} category {name!r} now: {db.work_title(exc.kind, exc.run_id, exc.title)} is running "
        f"{held}{since}. It stores its suggestions under the corpus' categories, so deleting or merging one of "
        "them under it would abort it. Wait until it ends, or stop it, then try again.")


def _clean_new_name(new_name: str) -> str:
    name = " ".join((new_name or "").split())
    if not name:
        raise ValueError("Type the new name of the category.")
    if len(name) > 200:
        raise ValueError("The new category name is longer than 200 characters.")
    return name


def merge_target(store: db.Store, corpus_id: int, name: str, new_name: str) -> db.CategoryInfo | None:
    """The other category of the corpus that renaming category ``name`` to ``new_name`` would clash with (the same
    name, or one equal up to case and spacing: the annotators could not tell them apart), None when the rename is
    free. Prefers the exact spelling when several clash. Raises ``ValueError`` for an unknown ``name`` or a blank
    or too long ``new_name``."""
    category = find_category(store, corpus_id, name)
    new = _clean_new_name(new_name)
    clashing = [c for c in db.list_categories(store, corpus_id)
                if c.id != category.id and fold_name(c.name) == fold_name(new)]
    return next((c for c in clashing if c.name == new), clashing[0] if clashing else None)


def usage_summary(usage: db.CategoryUsage) -> str:
    """What a category labels: "3 documents are labelled 'x' (2 by a decision and 1 by a suggestion); 4 decisions
    and 2 suggestions name it (older ones included)"."""
    decided, suggested = usage.n_decided, usage.n_labelled - usage.n_decided
    how = " and ".join(part for part in (counted(decided, "by a decision", "by a decision") if decided else "",
                                        counted(suggested, "by a suggestion", "by a suggestion") if suggested else "")
                       if part)
    return (f"{counted(usage.n_labelled, 'document')} {'is' if usage.n_labelled == 1 else 'are'} labelled "
            f"{usage.category.name!r}" + (f" ({how})" if how else "") +
            f"; {counted(usage.n_decisions, 'decision')} and {counted(usage.n_suggestions, 'suggestion')} name it "
            "(older ones included)")


def _eval_note(n_runs: int) -> str:
    return (f" The corpus' {counted(n_runs, 'stored evaluation run')} keep{'s' if n_runs == 1 else ''} the scores "
            "computed with the categories as they were; evaluate again to score the new ones." if n_runs else "")


def delete_impact(usage: db.CategoryUsage) -> str:
    """What deleting the category of ``usage`` does, in plain words (shown before the user confirms)."""
    if not (usage.n_labelled or usage.n_decisions or usage.n_suggestions):
        return (f"No document is labelled {usage.category.name!r} and no stored label names it: deleting it loses "
                "nothing.")
    queries = (f" {counted(len(usage.query_ids), 'query', 'queries')} ha{'s' if len(usage.query_ids) == 1 else 've'} "
               "such a document in its ground truth: it keeps it and is flagged for review."
               if usage.query_ids else "")
    return (f"{usage_summary(usage)}. Deleting it deletes those decisions and suggestions: each such document falls "
            "back to its earlier label of another category, if any, else becomes unlabelled (move the labels to "
            f"another category instead to keep them).{queries}{_eval_note(usage.n_eval_runs)}")


def merge_impact(usage: db.CategoryUsage, into: db.CategoryInfo) -> str:
    """What merging the category of ``usage`` into ``into`` does, in plain words."""
    return (f"{usage_summary(usage)}. Merging moves them all to {into.name!r} and deletes {usage.category.name!r}; "
            "queries whose ground truth had documents of both are flagged (their aspects then share one category)."
            + _eval_note(usage.n_eval_runs))


def _removal_message(done: db.CategoryRemoval, n_runs: int) -> str:
    rows = f"{counted(done.n_decisions, 'decision')} and {counted(done.n_suggestions, 'suggestion')}"
    if done.merged_into is not None:
        text = (f"Merged {done.name!r} into {done.merged_into!r}: {counted(done.n_relabelled, 'document')} labelled "
                f"{done.name!r} {'is' if done.n_relabelled == 1 else 'are'} labelled {done.merged_into!r} now ({rows} "
                "moved).")
    else:
        text = (f"Deleted category {done.name!r} with its {rows}: {counted(done.n_unlabelled, 'document')} "
                f"{'is' if done.n_unlabelled == 1 else 'are'} unlabelled now, {done.n_fallback} fell back to an "
                "earlier label.")
    if done.flagged_queries:
        ids = ", ".join(str(q) for q in done.flagged_queries)
        text += (f" Flagged {counted(len(done.flagged_queries), 'query', 'queries')} whose ground truth's categories "
                 f"changed (id {ids}): review {'it' if len(done.flagged_queries) == 1 else 'them'} in the Query "
                 "Builder.")
    return text + _eval_note(n_runs)


def rename_category(store: db.Store, corpus_id: int, name: str, new_name: str, *, merge: bool = False,
                    expected_labels_version: int | None = None) -> str:
    """Rename the corpus' category ``name`` to ``new_name`` (whitespace runs as one space); returns what was done,
    in plain words. When another category has that name (or one equal up to case and spacing,
    :func:`merge_target`) the two are merged with ``merge`` (``db.merge_category``: its labels move to the
    other, which takes the name as typed, and it is deleted), else :class:`MergeNeeded` is raised, saying what a merge
    would do. Everything happens in one transaction. ``expected_labels_version``: the labels version the user saw
    the counts at (a merge is refused with ``db.StoreError`` when labels changed since). A merge is refused with
    :class:`CategoryInUse` while a pre-annotation of the corpus runs (a rename is not: ids stay). Raises
    ``ValueError`` (unknown category, blank name, the same name) or ``db.StoreError``; nothing is changed then."""
    category = find_category(store, corpus_id, name)
    into = merge_target(store, corpus_id, name, new_name)
    new = _clean_new_name(new_name)
    if into is None:
        if new == category.name:
            raise ValueError(f"The category is called {new!r} already.")
        db.update_category(store, category.id, name=new)
        return f"Renamed category {category.name!r} to {new!r}."
    usage = db.category_usage(store, category.id)
    if not merge:
        same = "" if into.name == new else f", which differs from {new!r} only in case or spacing"
        raise MergeNeeded(f"The corpus has a category {into.name!r} already{same}: the two can only be merged. "
                          + merge_impact(usage, into), into)
    try:
        done = db.merge_category(store, category.id, into.id, new_name=new if new != into.name else None,
                                 expected_labels_version=expected_labels_version,
                                 unless_leased=_while_preannotating(store, corpus_id))
    except db.LeaseHeldError as exc:
        raise _in_use(exc, "merge", category.name) from None
    return _removal_message(done, usage.n_eval_runs)


def delete_category(store: db.Store, corpus_id: int, name: str, *, move_to: str | None = None,
                    confirm: bool = False, expected_labels_version: int | None = None) -> str:
    """Delete the corpus' category ``name``; returns what was done, in plain words. With ``move_to`` (another
    category) its labels move there first (a merge, as :func:`rename_category` does); without, its decisions and
    suggestions are deleted with it (``db.delete_category``: documents fall back to an earlier label or become
    unlabelled, queries whose ground truth held one are flagged), which needs ``confirm`` when there are any
    (else :class:`ConfirmationNeeded`, saying how many). One transaction; ``expected_labels_version`` as in
    :func:`rename_category`. Refused with :class:`CategoryInUse` (a ``db.StoreError``) while a pre-annotation of
    the corpus runs. Raises ``ValueError`` or ``db.StoreError``; nothing is changed then."""
    category = find_category(store, corpus_id, name)
    usage = db.category_usage(store, category.id)
    if move_to is not None:
        into = find_category(store, corpus_id, move_to)
        if into.id == category.id:
            raise ValueError(f"Choose another category than {category.name!r} to move its labels to.")
        try:
            done = db.merge_category(store, category.id, into.id, expected_labels_version=expected_labels_version,
                                     unless_leased=_while_preannotating(store, corpus_id))
        except db.LeaseHeldError as exc:
            raise _in_use(exc, "delete", category.name) from None
        return _removal_message(done, usage.n_eval_runs)
    if (usage.n_labelled or usage.n_decisions or usage.n_suggestions) and not confirm:
        raise ConfirmationNeeded(delete_impact(usage))
    try:
        done = db.delete_category(store, category.id, expected_labels_version=expected_labels_version,
                                  unless_leased=_while_preannotating(store, corpus_id))
    except db.LeaseHeldError as exc:
        raise _in_use(exc, "delete", category.name) from None
    return _removal_message(done, usage.n_eval_runs)


# --------------------------------------------------------------------------- pre-annotation


@dataclass(frozen=True)
class PreannotateSummary:
    """Outcome of :func:`preannotate`: ``todo`` documents needed a suggestion when it started
    (``already_done`` of those in scope had one: every document, or with ``undecided_only`` those without a label
    decision); ``ok``/``failed`` were stored; ``cancelled`` says it stopped early; ``retry_failed``: a failed
    suggestion is asked again by the next run (as the page and ``mrag-studio annotate`` run it); ``errors``:
    the first failures, each naming its document by title with its id; ``causes``: the stored failures by cause
    (:mod:`services.llm.causes`); ``stop_cause`` / ``stop_error``: why the endpoint stopped the run (an error every
    request would meet: ``cancelled`` is set then too), the error as its failed documents store it; ``notes``: how
    the run adapted to the endpoint (:func:`~services.workflows.llm_annotation.run_notes`)."""

    agent: str
    model_version: str
    todo: int
    already_done: int
    ok: int
    failed: int
    cancelled: bool
    errors: list[str] = field(default_factory=list)
    retry_failed: bool = True
    causes: dict[str, int] = field(default_factory=dict)
    stop_cause: str | None = None
    stop_error: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def stored(self) -> int:
        return self.ok + self.failed

    @property
    def remaining(self) -> int:
        """The documents the next run asks for: ``todo - ok`` (never sent, and failed ones asked again), or
        ``todo - stored`` when failed ones are not retried."""
        return self.todo - (self.ok if self.retry_failed else self.stored)


def _progress_within(progress: ProgressFn, offset: int, total: int, done: int, _batch: int) -> None:
    """A batch's ``progress(done, batch size)`` as the whole run's ``progress(offset + done, total)``."""
    progress(min(offset + done, total), total)


def preannotate(
    store: db.Store,
    corpus_id: int,
    annotator: Annotator,
    *,
    batch_size: int = 32,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    retry_failed: bool = True,
    undecided_only: bool = False,
    on_summary: Callable[[PreannotateSummary], None] | None = None,
    activity: ActivityFn | None = None,
) -> PreannotateSummary:
    """Suggest a category for every document of the corpus that has no ok suggestion from this
    annotator yet (resume), ``batch_size`` documents at a time, storing each batch at once; with
    ``undecided_only`` only for documents that have no label decision yet (e.g. not the ones
    imported with a label: an LLM run then costs tokens only for what needs a label).

    ``progress(done, todo)`` is called after each stored batch, and within a batch as the annotator
    finishes documents (an LLM answers one request at a time; on a slow endpoint a batch of 32 takes
    minutes); ``done`` counts documents whose suggestion (ok or failed) is stored, or will be even if the
    run is stopped now: when ``progress`` (Streamlit stopping the page) or the annotator raises mid-batch
    (a Ctrl+C), the suggestions the batch handed over so far are stored in one transaction before the
    exception propagates (each document with its whole suggestion row, or none). ``activity`` reaches the
    annotator (an LLM's requests in flight, at least every 0.1 s while it waits). ``on_summary`` gets the
    summary so far when the run has its to-do list and after each store (a stopped run's own counts:
    ``cancelled`` is set for the store of a stopped batch). ``cancel`` is checked between
    batches (and passed to the annotator, so an LLM run stops sending). Raises ``ValueError``
    when the corpus has no (or ambiguous) categories or ``batch_size < 1``; an annotator error
    (e.g. the embedding model failing) propagates after the batches before it were stored. Holds the corpus'
    lease (:func:`preannotation_lease`) while it runs: raises ``db.RunInProgressError`` (naming the corpus by its
    name and id) when another process pre-annotates this corpus now.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1.")
    categories = [CategorySpec(c.name, c.description) for c in db.list_categories(store, corpus_id)]
    validate_categories(categories)
    cancel = cancel if cancel is not None else threading.Event()
    # RunInProgressError: another process pre-annotates this corpus now
    with holding_lease(store, preannotation_lease(corpus_id), "Pre-annotation of corpus", corpus_id, cancel,
                       title=db.get_corpus(store, corpus_id).name):
        # read again under the lease: a category deleted or merged before it was taken is gone from these, and
        # none can be deleted or merged while it is held (delete_category / rename_category refuse)
        categories = [CategorySpec(c.name, c.description) for c in db.list_categories(store, corpus_id)]
        validate_categories(categories)
        return _preannotate(store, corpus_id, annotator, categories, batch_size=batch_size, progress=progress,
                            cancel=cancel, retry_failed=retry_failed, undecided_only=undecided_only,
                            on_summary=on_summary, activity=activity)


def preannotation_lease(corpus_id: int) -> str:
    """The name of the lease (:func:`db.take_lease`) a pre-annotation of ``corpus_id`` holds while it runs, in
    whichever process: the app and ``mrag-studio annotate`` never ask for the same documents at once."""
    return f"preannotate:{int(corpus_id)}"


def _suggestion_row(s: Suggestion, by_name: dict[str, db.CategoryInfo]) -> dict[str, Any]:
    """The ``db.add_suggestions`` row of ``s``: ``ok`` with its category's id, else ``failed`` with its error (a
    label that is no category of the corpus is an error too) and no score."""
    row: dict[str, Any] = {
        "document_id": int(s.document_key), "agent": s.agent, "model_version": s.model_version,
        "score": s.score, "reason": s.reason,
    }  # fmt: skip
    if s.ok and s.label in by_name:
        row.update(status="ok", category_id=by_name[s.label].id)
    else:
        row.update(status="failed", error=s.error or f"label {s.label!r} is not a category of this corpus",
                   score=None)
    return row


def _store_stopped_batch(store: db.Store, rows: list[dict[str, Any]], exc: BaseException) -> bool:
    """Store the rows a batch handed over before ``exc`` stopped it, in one transaction; True when stored. When
    that fails too, ``exc`` (the caller re-raises it) gets a note saying so: nothing of the batch is stored then."""
    try:
        db.add_suggestions(store, rows)
    except Exception as err:  # noqa: BLE001 - the stop is what propagates; the lost rows are named on it
        exc.add_note(f"The {counted(len(rows), 'suggestion')} received before the stop could not be stored ({err}); "
                     "a resume asks for those documents again.")
        return False
    return True


def _preannotate(store: db.Store, corpus_id: int, annotator: Annotator, categories: list[CategorySpec], *,
                 batch_size: int, progress: ProgressFn | None, cancel: threading.Event, retry_failed: bool,
                 undecided_only: bool, on_summary: Callable[[PreannotateSummary], None] | None,
                 activity: ActivityFn | None = None) -> PreannotateSummary:
    """:func:`preannotate`'s body once the lease is held."""
    by_name = {c.name: c for c in db.list_categories(store, corpus_id)}
    # the documents in scope: with undecided_only, those without a label decision (a labelled one never "had" a
    # suggestion just because it was left out)
    n_total = db.undecided_documents(store, corpus_id) if undecided_only else len(db.document_ids(store, corpus_id))
    todo_ids = db.documents_without_suggestion(
        store, corpus_id, annotator.agent, annotator.model_version, retry_failed=retry_failed,
        undecided_only=undecided_only,
    )
    ok = failed = 0
    errors: list[str] = []
    causes: dict[str, int] = {}

    def summary(cancelled: bool) -> PreannotateSummary:
        stopped = getattr(annotator, "stopped_by", lambda: None)()
        return PreannotateSummary(
            agent=annotator.agent, model_version=annotator.model_version, todo=len(todo_ids),
            already_done=n_total - len(todo_ids), ok=ok, failed=failed, cancelled=cancelled, errors=list(errors),
            retry_failed=retry_failed, causes=dict(causes), stop_cause=stopped[0] if stopped else None,
            stop_error=stopped[1] if stopped else "", notes=getattr(annotator, "notes", list)(),
        )  # fmt: skip

    def tally(rows: list[dict[str, Any]], titles: dict[int, str]) -> None:
        nonlocal ok, failed
        for row in rows:
            if row["status"] == "ok":
                ok += 1
                continue
            failed += 1
            cause = cause_of(row["error"]) or "other"
            causes[cause] = causes.get(cause, 0) + 1
            if len(errors) < 5:
                errors.append(f"{document_name(titles.get(row['document_id'], ''), row['document_id'])}: "
                              f"{row['error']}")

    if on_summary is not None:
        on_summary(summary(False))
    if progress is not None:
        progress(0, len(todo_ids))
    for start in range(0, len(todo_ids), batch_size):
        if cancel.is_set():
            return summary(True)
        batch = db.get_documents(store, todo_ids[start : start + batch_size])
        docs = [AnnotationDoc(key=d.id, title=d.title, text=d.text) for d in batch]
        titles = {d.id: d.title for d in batch}
        within = None if progress is None else partial(_progress_within, progress, start, len(todo_ids))
        received: list[dict[str, Any]] = []
        try:
            suggestions = annotator.annotate(docs, categories, cancel=cancel, progress=within,
                                             on_suggestion=lambda s: received.append(_suggestion_row(s, by_name)),
                                             **({"activity": activity} if activity is not None else {}))
        except BaseException as exc:  # Streamlit stopping the page in progress, a Ctrl+C, the annotator failing
            if received and _store_stopped_batch(store, received, exc):
                tally(received, titles)
                if on_summary is not None:
                    on_summary(summary(True))
            raise
        rows = [_suggestion_row(s, by_name) for s in suggestions]
        db.add_suggestions(store, rows)
        tally(rows, titles)
        stopped = len(suggestions) < len(docs)  # the annotator honoured a cancel mid-batch
        if on_summary is not None:
            on_summary(summary(stopped))
        if progress is not None:
            progress(start + len(suggestions), len(todo_ids))
        if stopped:
            return summary(True)
    return summary(False)


def document_name(title: str, document_id: Any) -> str:
    """A document as messages name it: by its title (quoted, whitespace runs as one space), its id in brackets
    (``document 'Rome' (id 12)``), or ``document 12`` when it has no title."""
    title = " ".join((title or "").split())
    return f"document {title!r} (id {document_id})" if title else f"document {document_id}"


# --------------------------------------------------------------------------- review


_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
_STOP = frozenset(
    "about also among and any are been being between both but can could does each from have into its more most "
    "much such than that their them then there these they this those through under very what when where which "
    "while with within without would your other over only some".split()
)


def highlight_keywords(*texts: str, limit: int = 12) -> list[str]:
    """Distinct content words (4+ letters, no stop words) of ``texts`` in order, at most ``limit``."""
    out: list[str] = []
    seen: set[str] = set()
    for text in texts:
        for word in _WORD.findall(text or ""):
            low = word.lower()
            if low in _STOP or low in seen:
                continue
            seen.add(low)
            out.append(word)
            if len(out) >= limit:
                return out
    return out


@dataclass(frozen=True)
class ReviewItem:
    """What the reviewer sees for one document: the document (its version is the one to send
    back), the latest suggestion (ok or failed, or None), the latest decision, keywords."""

    document: db.DocumentRow
    suggestion: db.SuggestionRow | None
    decision: db.DecisionRow | None
    keywords: list[str]


def _from_agent(s: db.SuggestionRow, agent: str | None, model_version: str | None) -> bool:
    return (agent is None or s.agent == agent) and (model_version is None or s.model_version == model_version)


def review_item(
    store: db.Store, document_id: int, *, agent: str | None = None, model_version: str | None = None,
    annotator: str | None = None,
) -> ReviewItem:
    """The review view of a document (its latest suggestion, from ``agent`` / ``model_version``
    when given); with ``annotator`` (a team member labelling blind) its decision is their own latest blind one."""
    doc = db.get_document(store, document_id)
    suggestions = [s for s in db.list_suggestions(store, document_id) if _from_agent(s, agent, model_version)]
    suggestion = suggestions[-1] if suggestions else None
    decisions = [d for d in db.list_decisions(store, document_id)
                 if annotator is None or (d.blind and d.annotator == annotator)]
    decision = decisions[-1] if decisions else None
    keywords: list[str] = []
    cat_id = suggestion.category_id if suggestion is not None and suggestion.category_id is not None else (
        decision.category_id if decision is not None else None)
    cat = next((c for c in db.list_categories(store, doc.corpus_id) if c.id == cat_id), None)
    if cat is not None:  # words of the suggested (else the decided) category
        keywords = highlight_keywords(cat.name, cat.description)
    return ReviewItem(doc, suggestion, decision, keywords)


def next_in_queue(queue: Sequence[int], current: int | None) -> int | None:
    """The first id of ``queue`` (ascending) after ``current``; wraps to the start; None if empty."""
    if not queue:
        return None
    if current is None:
        return queue[0]
    later = [i for i in queue if i > current]
    if later:
        return later[0]
    return queue[0] if queue[0] != current else None


# --------------------------------------------------------------------------- bulk


@dataclass(frozen=True)
class BulkRow:
    """A document with its current label and latest ok suggestion (for the bulk table)."""

    document_id: int
    version: int
    title: str
    label: str | None
    label_source: str | None
    suggestion_id: int | None
    suggestion: str | None
    score: float | None
    agent: str | None


def bulk_rows(
    store: db.Store, document_ids: Sequence[int], *, agent: str | None = None, model_version: str | None = None,
    annotator: str | None = None,
) -> list[BulkRow]:
    """Rows for the bulk table (in the order of ``document_ids``; keep it to one page), with the
    latest ok suggestion (from ``agent`` / ``model_version`` when given); with ``annotator`` (a team member
    labelling blind) the label is their own latest blind one (``label_source`` ``"you"``), never a colleague's."""
    out: list[BulkRow] = []
    for doc in db.get_documents(store, document_ids):
        oks = [s for s in db.list_suggestions(store, doc.id)
               if s.status == "ok" and _from_agent(s, agent, model_version)]
        sug = oks[-1] if oks else None
        label, source = doc.label, doc.label_source
        if annotator is not None:
            own = [d for d in db.list_decisions(store, doc.id) if d.blind and d.annotator == annotator]
            label, source = (own[-1].category, "you") if own else (None, None)
        out.append(BulkRow(
            document_id=doc.id, version=doc.version, title=doc.title, label=label, label_source=source,
            suggestion_id=sug.id if sug else None, suggestion=sug.category if sug else None,
            score=sug.score if sug else None, agent=sug.agent if sug else None,
        ))  # fmt: skip
    return out


def accept_rows(store: db.Store, rows: Sequence[BulkRow], annotator: str, *, blind: bool = False
                ) -> db.BulkDecisionResult:
    """Accept the suggestions of ``rows`` (one transaction; rows without one are ignored), stored as bulk
    acceptances (counted apart in agreement figures); ``blind``: as a team member's own labels.

    Uses each row's ``version`` as the expected version; documents changed meanwhile are left out
    and reported in ``conflicts``."""
    pairs = [(r.suggestion_id, r.version) for r in rows if r.suggestion_id is not None]
    if not pairs:
        return db.BulkDecisionResult(new_versions={})
    return db.accept_suggestions(store, pairs, annotator, on_conflict="skip", method="bulk", blind=blind)


def apply_label(
    store: db.Store, document_ids: Sequence[int], category_id: int, annotator: str,
    versions: dict[int, int] | None = None, *, blind: bool = False,
) -> db.BulkDecisionResult:
    """Give ``category_id`` to several documents in one transaction (stored as ``neighbours`` decisions;
    ``blind``: as a team member's own labels). ``versions`` are the versions the user saw (default: the current
    ones); conflicting documents are skipped and reported."""
    docs = db.get_documents(store, document_ids)
    items = [
        db.DecisionIn(d.id, category_id, (versions or {}).get(d.id, d.version), None, "labelled with neighbours")
        for d in docs
    ]
    if not items:
        return db.BulkDecisionResult(new_versions={})
    return db.decide_labels(store, items, annotator, on_conflict="skip", method="neighbours", blind=blind)


# --------------------------------------------------------------------------- find similar


@dataclass(frozen=True)
class Neighbour:
    """A similar document: its row index in the embedded corpus, id and cosine similarity."""

    rank: int
    document_id: int
    score: float


def space_vectors(standard: np.ndarray, heads: np.ndarray, space: str | int) -> np.ndarray:
    """The ``[n, d]`` vectors of one space: ``"standard"`` or a head index."""
    if space == "standard":
        return standard
    h = int(space)
    if not 0 <= h < heads.shape[1]:
        raise ValueError(f"head {h} does not exist (the model has {heads.shape[1]} heads).")
    return heads[:, h, :]


def nearest_documents(
    vectors: np.ndarray, document_ids: Sequence[int], document_id: int, k: int = 10
) -> list[Neighbour]:
    """The ``k`` documents most similar (cosine, exact TorchIndex search) to ``document_id``,
    itself excluded. ``vectors`` rows follow ``document_ids``."""
    from mrag_core.backends import TorchIndex

    ids = list(document_ids)
    if document_id not in ids:
        raise ValueError(f"document {document_id} is not in the embedded corpus (re-embed it).")
    if len(ids) != vectors.shape[0]:
        raise ValueError("vectors and document ids differ in length.")
    row = ids.index(document_id)
    index = TorchIndex(vectors, metric="cosine", device="cpu")
    hits = index.search(vectors[row : row + 1], min(k + 1, len(ids)))
    out: list[Neighbour] = []
    for idx, score in zip(hits.ids[0, 0], hits.scores[0, 0]):
        if int(idx) == row:
            continue
        out.append(Neighbour(len(out) + 1, ids[int(idx)], float(score)))
        if len(out) >= k:
            break
    return out


# --------------------------------------------------------------------------- agreement


def confusion_table(agreement: db.Agreement) -> tuple[list[str], list[list[int]]]:
    """Category names (every name that occurs as suggested or decided, sorted) and the matrix
    ``m[i][j]`` = documents suggested ``names[i]`` and decided ``names[j]``."""
    names = sorted({s for s, _, _ in agreement.pairs} | {d for _, d, _ in agreement.pairs})
    pos = {n: i for i, n in enumerate(names)}
    matrix = [[0] * len(names) for _ in names]
    for suggested, decided, count in agreement.pairs:
        matrix[pos[suggested]][pos[decided]] += count
    return names, matrix
