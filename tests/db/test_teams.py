"""Annotation teams in the store: members, assignments, blind decisions (no version bump, no colleague conflicts),
adjudication beating later blind labels, the per-annotator review queue, bulk acceptance counted apart."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import db
from db import Store


def _team(store: Store, corpus_id: int, names: list[str], **kw: object) -> db.TeamInfo:
    kw = {"overlap_percent": 50.0, "per_shared": 2, **kw}
    return db.save_team(store, corpus_id, names, **kw)  # type: ignore[arg-type]


def test_save_team_keeps_members_in_order_and_removal_drops_their_assignments(
    store: Store, corpus: db.CorpusInfo, docs: list[int], cats: dict[str, int], count_rows: Callable[[str], int]
) -> None:
    assert db.get_team(store, corpus.id) is None
    team = _team(store, corpus.id, ["bob", "alice"], seed=7, by="lead")
    assert (team.names, team.overlap_percent, team.per_shared, team.seed, team.updated_by) == (
        ["bob", "alice"], 50.0, 2, 7, "lead")
    assert db.add_assignments(store, corpus.id, {docs[0]: ["bob", "alice"], docs[1]: ["alice"]}) == 3
    assert db.add_assignments(store, corpus.id, {docs[0]: ["bob"]}) == 0  # kept as it is
    assert db.assignment_map(store, corpus.id) == {docs[0]: ["bob", "alice"], docs[1]: ["alice"]}
    db.decide_label(store, docs[1], cats["sport"], "alice", 1, blind=True)
    team = db.get_team(store, corpus.id)
    assert [(m.name, m.n_assigned, m.n_labelled) for m in team.members] == [("bob", 1, 0), ("alice", 2, 1)]
    assert (team.n_assigned, team.n_shared) == (2, 1)

    team = _team(store, corpus.id, ["carol", "bob"], overlap_percent=20.0, per_shared=3)
    assert team.names == ["carol", "bob"] and (team.overlap_percent, team.per_shared) == (20.0, 3)
    assert db.assignment_map(store, corpus.id) == {docs[0]: ["bob"]}  # alice's assignments went with her
    assert [d.annotator for d in db.list_decisions(store, docs[1])] == ["alice"]  # her decision stays
    assert db.delete_team(store, corpus.id) and db.get_team(store, corpus.id) is None
    assert count_rows("team_members") == 0 and count_rows("assignments") == 0


@pytest.mark.parametrize("names, kw, message", [
    ([], {}, "at least one"),
    (["a", "a"], {}, "named twice"),
    ([" a"], {}, "padded"),
    (["a"], {"overlap_percent": 101.0}, "between 0 and 100"),
    (["a", "b"], {"per_shared": 1}, "2 annotators or more"),
])
def test_bad_team_settings_change_nothing(store: Store, corpus: db.CorpusInfo, names: list[str],
                                          kw: dict[str, object], message: str) -> None:
    _team(store, corpus.id, ["x"])
    with pytest.raises(db.InvalidInputError, match=message):
        _team(store, corpus.id, names, **kw)
    assert db.get_team(store, corpus.id).names == ["x"]


def test_assignments_refuse_other_corpora_and_strangers_whole(
    store: Store, corpus: db.CorpusInfo, docs: list[int], count_rows: Callable[[str], int]
) -> None:
    with pytest.raises(db.NotFoundError):
        db.add_assignments(store, corpus.id, {docs[0]: ["a"]})
    _team(store, corpus.id, ["a"])
    other = db.create_corpus(store, "Other")
    (foreign,) = db.add_documents(store, other.id, [{"text": "elsewhere"}]).document_ids
    with pytest.raises(db.InvalidInputError, match="not a document of corpus"):
        db.add_assignments(store, corpus.id, {docs[0]: ["a"], foreign: ["a"]})
    with pytest.raises(db.InvalidInputError, match="'z' is not a member"):
        db.add_assignments(store, corpus.id, {docs[0]: ["a"], docs[1]: ["z"]})
    assert count_rows("assignments") == 0


def test_blind_decisions_leave_the_version_and_never_conflict_with_colleagues(
    store: Store, docs: list[int], cats: dict[str, int]
) -> None:
    d = docs[0]
    assert db.decide_label(store, d, cats["sport"], "alice", 1, blind=True) == 1  # version stays
    assert db.decide_label(store, d, cats["science"], "bob", 1, blind=True) == 1  # seen at 1 too: no conflict
    # a shared (non-blind) label moves the version on; a blind decision seen before it is still taken ...
    assert db.decide_label(store, d, cats["politics"], "lead", 1) == 2
    assert db.decide_label(store, d, cats["politics"], "alice", 1, blind=True) == 1
    # ... but not once the text was edited since: the refusal names the edit, never a label
    db.update_document(store, d, text="a new text", expected_version=2, editor="ed")
    with pytest.raises(db.VersionConflictError) as err:
        db.decide_label(store, d, cats["sport"], "bob", 2, blind=True)
    message = str(err.value)
    assert "its text was edited by 'ed'" in message
    assert not any(name in message for name in ("sport", "science", "politics", "alice", "lead"))
    assert db.decide_label(store, d, cats["sport"], "bob", 3, blind=True) == 3
    rows = db.list_decisions(store, d)
    assert [(r.annotator, r.blind, r.method, r.based_on_version) for r in rows] == [
        ("alice", True, "review", 1), ("bob", True, "review", 1), ("lead", False, "review", 1),
        ("alice", True, "review", 1), ("bob", True, "review", 3)]


def test_a_shared_conflict_names_the_shared_change_not_a_blind_label(
    store: Store, docs: list[int], cats: dict[str, int]
) -> None:
    d = docs[0]
    db.update_document(store, d, title="renamed", expected_version=1, editor="ed")  # version 2
    db.decide_label(store, d, cats["science"], "alice", 2, blind=True)  # at version 2, not moving it
    with pytest.raises(db.VersionConflictError) as err:
        db.decide_label(store, d, cats["sport"], "lead", 1)
    assert "title was edited by 'ed'" in str(err.value) and "alice" not in str(err.value)


def test_blind_import_or_adjudication_is_refused(store: Store, docs: list[int], cats: dict[str, int]) -> None:
    for method in ("import", "adjudication"):
        with pytest.raises(db.InvalidInputError, match="never blind"):
            db.decide_label(store, docs[0], cats["sport"], "a", 1, method=method, blind=True)
    with pytest.raises(db.InvalidInputError, match="method must be one of"):
        db.decide_label(store, docs[0], cats["sport"], "a", 1, method="guess")


def test_adjudication_beats_later_blind_labels_but_not_later_shared_ones(
    store: Store, docs: list[int], cats: dict[str, int]
) -> None:
    d = docs[0]
    corpus_id = db.get_document(store, d).corpus_id

    def label() -> tuple[str, str]:
        lab = db.effective_label(store, d)
        return lab.category, lab.by

    db.decide_label(store, d, cats["sport"], "alice", 1, blind=True)
    db.decide_label(store, d, cats["science"], "bob", 1, blind=True)
    assert label() == ("science", "bob")  # until adjudicated: the latest label
    assert db.decide_label(store, d, cats["sport"], "judge", 1, method="adjudication", note="rules") == 2
    assert label() == ("sport", "judge")
    db.decide_label(store, d, cats["politics"], "bob", 2, blind=True)  # bob revises his own label
    assert label() == ("sport", "judge")
    assert db.get_document(store, d).label == "sport"
    assert db.category_counts(store, corpus_id)["sport"] == 1
    (adj,) = db.adjudications(store, corpus_id).values()
    assert (adj.document_id, adj.category, adj.adjudicator, adj.note) == (d, "sport", "judge", "rules")
    labels = {(b.annotator, b.category) for b in db.blind_labels(store, corpus_id)}
    assert labels == {("alice", "sport"), ("bob", "politics")}  # each annotator's latest blind label
    db.decide_label(store, d, cats["science"], "lead", 2)  # a later shared decision is the label again
    assert label() == ("science", "lead")


def test_review_queue_of_an_annotator_sees_only_their_assignments_and_labels(
    store: Store, corpus: db.CorpusInfo, docs: list[int], cats: dict[str, int]
) -> None:
    _team(store, corpus.id, ["alice", "bob"])
    db.add_assignments(store, corpus.id, {docs[0]: ["alice", "bob"], docs[1]: ["alice"], docs[2]: ["bob"]})
    db.decide_label(store, docs[0], cats["sport"], "bob", 1, blind=True)  # bob's label only
    db.decide_label(store, docs[1], cats["science"], "lead", 1)  # a shared label, not alice's
    db.add_suggestions(store, [{"document_id": docs[0], "category": "politics", "agent": "llm"}])

    def queue(**kw: object) -> list[int]:
        return db.review_queue(store, corpus.id, annotator="alice", **kw)  # type: ignore[arg-type]

    assert queue() == docs[:2]
    assert queue(unreviewed=True) == docs[:2]  # bob's and lead's decisions are not hers
    assert queue(category_id=cats["sport"]) == []  # bob's label does not put it in her sport queue
    assert queue(category_id=cats["politics"]) == [docs[0]]  # the suggestion does
    db.decide_label(store, docs[0], cats["sport"], "alice", 1, blind=True)
    assert queue(unreviewed=True) == [docs[1]]
    assert queue(disagreement=True) == [docs[0]]  # her sport vs the suggestion's politics
    assert db.review_queue(store, corpus.id, annotator="bob") == [docs[0], docs[2]]
    assert db.review_queue(store, corpus.id, annotator="nobody") == []
    assert db.review_queue(store, corpus.id, unreviewed=True) == [docs[2], docs[3]]  # shared view as before


def test_agreement_counts_bulk_accepted_suggestions_apart(
    store: Store, corpus: db.CorpusInfo, docs: list[int], cats: dict[str, int]
) -> None:
    ids = db.add_suggestions(store, [{"document_id": d, "category": c, "agent": "llm"}
                                     for d, c in zip(docs, ["sport", "sport", "science", "politics"])])
    db.accept_suggestions(store, [(ids[0], 1), (ids[1], 1)], "ann")  # bulk: agree by construction
    db.decide_label(store, docs[2], cats["science"], "ann", 1, suggestion_id=ids[2])  # one by one: agrees
    db.decide_label(store, docs[3], cats["sport"], "ann", 1)  # one by one: disagrees
    assert [d.method for d in db.list_decisions(store, docs[0])] == ["bulk"]
    apart = db.agreement(store, corpus.id)
    assert (apart.n, apart.n_agree, apart.n_bulk, apart.n_bulk_agree) == (2, 1, 2, 2)
    assert apart.per_category["sport"].n == 1  # docs[3]; the bulk ones are not in the table
    both = db.agreement(store, corpus.id, include_bulk=True)
    assert (both.n, both.n_agree, both.n_bulk) == (4, 3, 0)


def test_import_labels_are_recorded_as_imports_and_annotators_label_over_them_blind(store: Store) -> None:
    c = db.create_corpus(store, "Imported")
    (doc,) = db.add_documents(store, c.id, [{"text": "a goal", "label": "sport"}]).document_ids
    (row,) = db.list_decisions(store, doc)
    assert (row.annotator, row.method, row.blind) == (db.IMPORT_ANNOTATOR, "import", False)
    assert db.get_document(store, doc).version == 2  # the imported label made version 2 from 1
    (politics,) = db.add_categories(store, c.id, ["politics"])
    assert db.decide_label(store, doc, politics.id, "alice", 2, blind=True) == 2
    assert db.decide_label(store, doc, politics.id, "bob", 1, blind=True) == 1  # only a label changed since 1
