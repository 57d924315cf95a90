"""Plan multi-aspect queries: which documents each generated query is about.

Following the Multi-Head RAG benchmark construction (Besta et al.), a query
with ``n`` aspects is built from ``n`` documents of ``n`` *distinct*
categories. :func:`plan_queries` decides, for every requested aspect count,
``per_count`` such document tuples.

Contract
--------
* Every plan uses ``n`` distinct categories and one document from each.
* No document is used twice within the whole returned set.
* Deterministic: the same documents (in any input order), counts, ``per_count``
  and ``seed`` give the same plans. Documents are sorted by id before the
  seeded ``random.Random(seed)`` is used.
* Aspect counts larger than the number of categories are **dropped** (not
  capped to a smaller count, which would silently duplicate another count)
  with a warning; duplicate counts are merged with a warning.
* When the pool runs out (fewer than ``n`` categories still have unused
  documents) the set is **capped**: the count gets fewer than ``per_count``
  plans and a warning says how many were made. Nothing is raised; the warnings
  are on the returned :class:`PlanList` (``plans.warnings``).
* Allocation order: larger aspect counts are planned first (they need more
  distinct categories and are the first to become impossible); the returned
  list is ordered by the requested aspect counts, then by plan number.
* Category choice for a query: ``n`` categories drawn without replacement with
  probability proportional to their number of still-unused documents (so each
  unused document is about equally likely to be chosen, and large categories are
  not exhausted last); then one unused document uniformly from each.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable

from mrag_core.wording import counted

__all__ = ["DocRef", "PlanList", "QueryPlan", "SamplingError", "plan_queries"]


class SamplingError(ValueError):
    """The sampling request itself is invalid (no documents, bad counts, duplicate ids)."""


@dataclass(frozen=True)
class DocRef:
    """A document as seen by the planner: its id, title and category."""

    id: str
    title: str
    category: str


@dataclass(frozen=True)
class QueryPlan:
    """One query to generate: its aspect count and the ids of its documents (distinct categories)."""

    n_aspects: int
    doc_ids: tuple[str, ...]


class PlanList(list[QueryPlan]):
    """A ``list[QueryPlan]`` that also carries human-readable ``warnings``."""

    def __init__(self, plans: Iterable[QueryPlan] = (), warnings: Iterable[str] = ()) -> None:
        super().__init__(plans)
        self.warnings: list[str] = list(warnings)


def _validate(docs: list[DocRef], aspect_counts: list[int], per_count: int) -> None:
    """Raise :class:`SamplingError` for requests that cannot mean anything."""
    if not docs:
        raise SamplingError("No documents to build queries from: add documents to the collection first.")
    if per_count < 1:
        raise SamplingError(f"Queries per aspect count must be at least 1, got {per_count}.")
    if not aspect_counts:
        raise SamplingError("Choose at least one aspect count (number of documents per query).")
    bad = [c for c in aspect_counts if not isinstance(c, int) or isinstance(c, bool) or c < 1]
    if bad:
        raise SamplingError(f"Aspect counts must be whole numbers >= 1, got {bad}.")
    seen: set[str] = set()
    dupes: list[str] = []
    for d in docs:
        if d.id in seen:
            dupes.append(d.id)
        seen.add(d.id)
    if dupes:
        raise SamplingError(f"Document ids must be unique; repeated: {sorted(set(dupes))}.")


def _usable_counts(aspect_counts: list[int], n_categories: int) -> tuple[list[int], list[str]]:
    """Deduplicate counts (keeping first occurrence) and drop those above ``n_categories``."""
    warnings: list[str] = []
    usable: list[int] = []
    for count in aspect_counts:
        if count in usable:
            warnings.append(f"Aspect count {count} was requested twice; it is planned once.")
            continue
        if count > n_categories:
            warnings.append(
                f"Aspect count {count} was dropped: the collection has only {n_categories} "
                f"categor{'y' if n_categories == 1 else 'ies'}, and every aspect needs its own category."
            )
            continue
        usable.append(count)
    return usable, warnings


def _weighted_sample(rng: random.Random, names: list[str], weights: list[int], k: int) -> list[str]:
    """Draw ``k`` distinct names without replacement, each draw proportional to its weight."""
    names, weights = list(names), list(weights)
    chosen: list[str] = []
    for _ in range(k):
        total = sum(weights)
        point = rng.random() * total
        acc = 0.0
        pick = len(names) - 1
        for i, w in enumerate(weights):
            acc += w
            if point < acc:
                pick = i
                break
        chosen.append(names.pop(pick))
        weights.pop(pick)
    return chosen


def plan_queries(
    docs: list[DocRef], aspect_counts: list[int], per_count: int, seed: int
) -> PlanList:
    """Plan ``per_count`` queries for each aspect count (see the module docstring for the contract).

    Returns a :class:`PlanList` (a ``list[QueryPlan]``) whose ``warnings`` list
    dropped/merged counts and counts capped because documents ran out.
    Raises :class:`SamplingError` for an empty collection, ``per_count < 1``,
    non-positive counts or duplicate document ids.
    """
    docs = list(docs)
    _validate(docs, list(aspect_counts), per_count)
    rng = random.Random(seed)

    pools: dict[str, list[str]] = {}
    for d in sorted(docs, key=lambda d: d.id):
        pools.setdefault(d.category, []).append(d.id)
    for category in sorted(pools):
        rng.shuffle(pools[category])  # unused documents; we pop from the end

    usable, warnings = _usable_counts(list(aspect_counts), len(pools))
    planned: dict[int, list[QueryPlan]] = {c: [] for c in usable}
    for count in sorted(usable, reverse=True):
        for _ in range(per_count):
            available = sorted(c for c, ids in pools.items() if ids)
            if len(available) < count:
                warnings.append(_capped_warning(count, len(planned[count]), per_count, len(available),
                                                len(docs), len(pools)))
                break
            cats = _weighted_sample(rng, available, [len(pools[c]) for c in available], count)
            doc_ids = tuple(pools[c].pop(rng.randrange(len(pools[c]))) for c in cats)
            planned[count].append(QueryPlan(n_aspects=count, doc_ids=doc_ids))
    return PlanList((p for c in usable for p in planned[c]), warnings)


def _capped_warning(count: int, made: int, per_count: int, left: int, n_docs: int, n_categories: int) -> str:
    """Why aspect count ``count`` got ``made`` of its ``per_count`` plans: only ``left`` categories (fewer than
    ``count``) still had unused documents. Plain English for every number (1 aspect, no category, ...)."""
    aspects = counted(count, "aspect")
    if made:
        planned = f"Only {made} of {per_count} queries with {aspects} could be planned"
    elif per_count == 1:
        planned = f"The query with {aspects} could not be planned"
    else:
        planned = f"None of the {per_count} queries with {aspects} could be planned"
    if left == 0:
        why = "no category still had unused documents"
    else:
        why = (f"only {counted(left, 'category', 'categories')} still had unused documents, and each of these "
               f"queries needs {count}")
    return (f"{planned}: {why} ({counted(n_docs, 'document')} in {counted(n_categories, 'category', 'categories')};"
            " no document is used twice).")
