"""Tests for services.querygen.sampling.plan_queries."""

from __future__ import annotations

import pytest

from services.querygen.sampling import DocRef, PlanList, QueryPlan, SamplingError, plan_queries

CATS = "ABCDEF"
DOCS = [DocRef(f"{c}{i}", f"Title {c}{i}", c) for c in CATS for i in range(10)]
CATEGORY = {d.id: d.category for d in DOCS}


def test_same_seed_same_plans_regardless_of_input_order() -> None:
    a = plan_queries(DOCS, [1, 2, 3, 5], 4, seed=7)
    b = plan_queries(list(reversed(DOCS)), [1, 2, 3, 5], 4, seed=7)
    assert list(a) == list(b)
    assert list(plan_queries(DOCS, [1, 2, 3, 5], 4, seed=8)) != list(a)


def test_plans_have_distinct_categories_and_no_document_reuse() -> None:
    plans = plan_queries(DOCS, [1, 2, 3, 5], 4, seed=7)
    assert isinstance(plans, PlanList) and plans.warnings == []
    # ordered by requested count, per_count each
    assert [p.n_aspects for p in plans] == [1] * 4 + [2] * 4 + [3] * 4 + [5] * 4
    for plan in plans:
        assert len(plan.doc_ids) == plan.n_aspects
        cats = [CATEGORY[d] for d in plan.doc_ids]
        assert len(set(cats)) == plan.n_aspects
    used = [d for p in plans for d in p.doc_ids]
    assert len(used) == 4 * (1 + 2 + 3 + 5) == len(set(used))


def test_pool_exhaustion_caps_with_warning() -> None:
    # Categories A: a1, a2; B: b1, b2; C: c1. After one 3-aspect query (one doc from
    # each category) C is empty, so only two categories have documents left.
    small = [
        DocRef("a1", "a1", "A"), DocRef("a2", "a2", "A"),
        DocRef("b1", "b1", "B"), DocRef("b2", "b2", "B"), DocRef("c1", "c1", "C"),
    ]
    plans = plan_queries(small, [3], 4, seed=1)
    assert len(plans) == 1
    assert plans[0].n_aspects == 3 and "c1" in plans[0].doc_ids
    assert plans.warnings == [
        "Only 1 of 4 queries with 3 aspects could be planned: only 2 categories still had unused documents, and "
        "each of these queries needs 3 (5 documents in 3 categories; no document is used twice)."
    ]


def test_single_aspect_uses_every_document_once_then_stops() -> None:
    docs = [DocRef("x", "x", "A"), DocRef("y", "y", "B"), DocRef("z", "z", "B")]
    plans = plan_queries(docs, [1], 5, seed=3)
    assert sorted(d for p in plans for d in p.doc_ids) == ["x", "y", "z"]
    assert plans.warnings == [
        "Only 3 of 5 queries with 1 aspect could be planned: no category still had unused documents "
        "(3 documents in 2 categories; no document is used twice)."
    ]


def test_capped_warnings_are_plain_english_for_every_count() -> None:
    """Singular and plural, and 'no category' / 'none' rather than 'fewer than 1' or '0 of'."""
    one = [DocRef("a1", "a1", "A"), DocRef("b1", "b1", "B")]
    assert plan_queries(one, [2, 1], 2, seed=0).warnings == [
        "Only 1 of 2 queries with 2 aspects could be planned: no category still had unused documents "
        "(2 documents in 2 categories; no document is used twice).",
        "None of the 2 queries with 1 aspect could be planned: no category still had unused documents "
        "(2 documents in 2 categories; no document is used twice).",
    ]
    three = [DocRef("a1", "a1", "A"), DocRef("b1", "b1", "B"), DocRef("c1", "c1", "C"), DocRef("a2", "a2", "A")]
    assert plan_queries(three, [3, 2], 1, seed=0).warnings == [
        "The query with 2 aspects could not be planned: only 1 category still had unused documents, and each of "
        "these queries needs 2 (4 documents in 3 categories; no document is used twice).",
    ]
    assert plan_queries([DocRef("a1", "a1", "A")], [1], 2, seed=0).warnings == [
        "Only 1 of 2 queries with 1 aspect could be planned: no category still had unused documents "
        "(1 document in 1 category; no document is used twice).",
    ]


def test_counts_above_category_count_are_dropped_and_duplicates_merged() -> None:
    docs = [DocRef(f"{c}{i}", "t", c) for c in "ABC" for i in range(3)]
    plans = plan_queries(docs, [1, 5, 1, 3], 2, seed=0)
    assert [p.n_aspects for p in plans] == [1, 1, 3, 3]
    assert plans.warnings == [
        "Aspect count 5 was dropped: the collection has only 3 categories, and every aspect needs its own category.",
        "Aspect count 1 was requested twice; it is planned once.",
    ]


@pytest.mark.parametrize(
    ("docs", "counts", "per_count", "message"),
    [
        ([], [1], 1, "No documents"),
        (DOCS, [1], 0, "at least 1"),
        (DOCS, [], 1, "at least one aspect count"),
        (DOCS, [0, 2], 1, r"whole numbers >= 1, got \[0\]"),
        ([DocRef("d", "t", "A"), DocRef("d", "u", "B")], [1], 1, r"repeated: \['d'\]"),
    ],
)
def test_invalid_requests_raise(docs: list[DocRef], counts: list[int], per_count: int, message: str) -> None:
    with pytest.raises(SamplingError, match=message):
        plan_queries(docs, counts, per_count, seed=0)


def test_plan_is_a_plain_value() -> None:
    assert QueryPlan(2, ("a", "b")) == QueryPlan(2, ("a", "b"))
