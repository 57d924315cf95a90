"""Dealing documents out to annotators (services.annotate.assignment): overlap, balance, determinism, resume."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest

from services.annotate.assignment import deal, shared_target

TEAM = ["ann", "bob", "cy"]


def _loads(plan: dict[int, list[str]]) -> Counter[str]:
    return Counter(a for who in plan.values() for a in who)


def test_overlap_share_balance_and_pairs_from_nothing() -> None:
    plan = deal(range(1, 31), TEAM, overlap=0.4)
    assert sorted(plan) == list(range(1, 31))
    shared = {d: who for d, who in plan.items() if len(who) > 1}
    assert len(shared) == 12  # round(0.4 x 30)
    assert all(len(set(who)) == 2 for who in shared.values())
    assert _loads(plan) == {"ann": 14, "bob": 14, "cy": 14}  # 12 x 2 + 18 = 42 labels, 14 each
    assert Counter(p for who in shared.values() for p in combinations(who, 2)) == {
        ("ann", "bob"): 4, ("ann", "cy"): 4, ("bob", "cy"): 4}  # every pair has documents to compare


def test_same_input_same_deal_and_the_seed_changes_it() -> None:
    assert deal(range(50), TEAM, overlap=0.3, seed=1) == deal(list(reversed(range(50))), TEAM, overlap=0.3, seed=1)
    assert deal(range(50), TEAM, overlap=0.3, seed=1) != deal(range(50), TEAM, overlap=0.3, seed=2)


def test_resume_keeps_earlier_assignments_and_tops_the_overlap_up() -> None:
    first = deal(range(1, 21), TEAM, overlap=0.4)
    again = deal(range(1, 21), TEAM, overlap=0.4, existing=first)
    assert again == {}  # nothing new: nothing dealt
    later = deal(range(1, 31), TEAM, overlap=0.4, existing=first)
    assert sorted(later) == list(range(21, 31))  # only the new documents
    together = {**first, **later}
    assert sum(len(w) > 1 for w in together.values()) == 12  # round(0.4 x 30), as if dealt at once
    loads = _loads(together)
    assert max(loads.values()) - min(loads.values()) <= 1


def test_a_newcomer_gets_the_new_documents_and_a_leaver_s_are_dealt_again() -> None:
    first = deal(range(1, 13), ["ann", "bob"], overlap=0.0)
    later = deal(range(1, 19), ["ann", "bob", "cy"], overlap=0.0, existing=first)
    assert sorted(later) == list(range(13, 19)) and _loads(later) == {"cy": 6}  # evens the loads out
    bobs = {d for d, who in first.items() if who == ["bob"]}
    after = deal(range(1, 13), ["ann", "cy"], overlap=0.0, existing=first)
    assert set(after) == bobs  # bob left: his documents are dealt again, ann's stay hers


def test_one_annotator_shares_nothing_and_a_shared_document_never_exceeds_the_team() -> None:
    assert all(who == ["ann"] for who in deal(range(5), ["ann"], overlap=1.0).values())
    assert all(who == TEAM for who in deal(range(4), TEAM, overlap=1.0, per_shared=5).values())


def test_shared_target_and_bad_settings() -> None:
    assert [shared_target(41, p) for p in (0.0, 0.2, 0.5, 1.0)] == [0, 8, 21, 41]
    with pytest.raises(ValueError, match="between 0 and 1"):
        deal([1], TEAM, overlap=20)
    with pytest.raises(ValueError, match="2 annotators or more"):
        deal([1], TEAM, overlap=0.2, per_shared=1)
    with pytest.raises(ValueError, match="named twice"):
        deal([1], ["a", "a"], overlap=0.2)
    with pytest.raises(ValueError, match="no annotator"):
        deal([1], [], overlap=0.2)
