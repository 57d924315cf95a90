"""Annotation teams and agreement between annotators (services.workflows.agreement): assignment with overlap,
blindness, the figures against the libraries, disagreements and adjudication, names."""

from __future__ import annotations

from collections import Counter

import pytest
from sklearn.metrics import cohen_kappa_score

import db
from services.annotate.assignment import deal
from services.workflows import agreement as agw
from services.workflows import annotation as aw

CATS = ["sport", "politics", "science"]


def _corpus(store: db.Store, n: int, name: str = "Team corpus") -> tuple[int, list[int], dict[str, int]]:
    c = db.create_corpus(store, name)
    db.add_categories(store, c.id, CATS)
    ids = db.add_documents(store, c.id, [{"title": f"Doc {i}", "text": f"text {i}"} for i in range(n)]).document_ids
    return c.id, ids, {x.name: x.id for x in db.list_categories(store, c.id)}


def _label(store: db.Store, who: str, doc: int, cat_id: int) -> None:
    db.decide_label(store, doc, cat_id, who, db.get_document(store, doc).version, blind=True)


def test_team_deals_documents_with_overlap_and_assign_resumes(store: db.Store) -> None:
    corpus_id, ids, _ = _corpus(store, 20)
    result = agw.save_team(store, corpus_id, "alice\nbob, carol\n", overlap_percent=30, per_shared=2, by="lead")
    assert (result.n_new, result.n_new_shared) == (20, 6)  # round(0.3 x 20)
    assert db.assignment_map(store, corpus_id) == deal(ids, ["alice", "bob", "carol"], overlap=0.3)  # as dealt
    team = result.team
    assert sorted(m.n_assigned for m in team.members) == [8, 9, 9]  # 20 + 6 = 26 labels to give
    assert (team.n_assigned, team.n_shared, team.updated_by) == (20, 6, "lead")
    assert "Assigned 20 documents (6 to 2 annotators each)" in result.message()

    more = db.add_documents(store, corpus_id, [{"text": f"later {i}"} for i in range(10)]).document_ids
    before = db.assignment_map(store, corpus_id)
    again = agw.assign(store, corpus_id)
    after = db.assignment_map(store, corpus_id)
    assert again.n_new == 10 and set(after) == set(ids) | set(more)
    assert all(after[d] == who for d, who in before.items())  # nothing moved
    assert again.team.n_shared == 9  # round(0.3 x 30)
    assert agw.assign(store, corpus_id).n_new == 0  # idempotent
    assert "Every document is assigned already" in agw.assign(store, corpus_id).message()

    # a member leaves: their documents (those nobody else has) are dealt again to the others
    carols = {d for d, who in after.items() if who == ["carol"]}
    changed = agw.save_team(store, corpus_id, "alice\nbob", overlap_percent=30, per_shared=2, by="lead")
    assert changed.n_new == len(carols)
    assert set(db.assignment_map(store, corpus_id)) == set(ids) | set(more)


def test_blind_annotators_never_see_a_colleague_s_label(store: db.Store) -> None:
    corpus_id, ids, cats = _corpus(store, 4)
    agw.save_team(store, corpus_id, "alice\nbob", overlap_percent=100, per_shared=2, by="lead")
    doc = ids[0]
    db.add_suggestions(store, [{"document_id": doc, "category": "science", "agent": "llm"}])
    _label(store, "bob", doc, cats["politics"])
    assert agw.team_member(store, corpus_id, " ALICE ") == "alice"
    assert agw.team_member(store, corpus_id, "eve") is None

    item = aw.review_item(store, doc, annotator="alice")
    assert item.decision is None and item.suggestion.category == "science"  # the suggestion, not bob's label
    assert db.review_queue(store, corpus_id, annotator="alice", unreviewed=True) == ids
    assert agw.own_labels(store, corpus_id, "alice") == {}
    (row,) = aw.bulk_rows(store, [doc], annotator="alice")
    assert (row.label, row.label_source, row.suggestion) == (None, None, "science")
    shared_view = aw.bulk_rows(store, [doc])[0]
    assert shared_view.label == "politics"  # the shared view (not on the team) shows the document's label

    aw.accept_rows(store, [row], "alice", blind=True)  # bulk, blind
    assert aw.review_item(store, doc, annotator="alice").decision.category == "science"
    assert aw.review_item(store, doc, annotator="bob").decision.category == "politics"
    assert [(d.annotator, d.method, d.blind) for d in db.list_decisions(store, doc)] == [
        ("bob", "review", True), ("alice", "bulk", True)]
    aw.apply_label(store, [ids[1], ids[2]], cats["sport"], "alice", blind=True)
    assert agw.own_labels(store, corpus_id, "alice") == {doc: "science", ids[1]: "sport", ids[2]: "sport"}
    assert {d.method for i in ids[1:3] for d in db.list_decisions(store, i)} == {"neighbours"}
    assert db.get_document(store, doc).version == 1  # blind labels move no version


def test_figures_match_the_libraries_and_say_what_they_rest_on(store: db.Store) -> None:
    corpus_id, ids, cats = _corpus(store, 10)
    alice = ["sport", "sport", "politics", "politics", "science", "science", "sport", "politics"]
    bob = ["sport", "politics", "politics", "politics", "science", "sport", "sport", "science"]
    for doc, a, b in zip(ids, alice, bob):
        _label(store, "alice", doc, cats[a])
        _label(store, "bob", doc, cats[b])
    _label(store, "alice", ids[8], cats["sport"])  # alone: not compared
    two = agw.annotator_agreement(store, corpus_id)
    assert (two.annotators, two.n_documents, two.n_labels) == (["alice", "bob"], 8, 17)
    assert two.cohen.value == pytest.approx(cohen_kappa_score(alice, bob)) and two.cohen.n == 8
    # by hand: p_o = 5/8; alice s 3 p 3 c 2, bob s 3 p 3 c 2 -> p_e = (9 + 9 + 4) / 64 = 22/64; (40-22)/(64-22)
    assert two.cohen.value == pytest.approx(18 / 42)
    assert [(p.first, p.second, p.figure.n) for p in two.pairs] == [("alice", "bob", 8)]
    assert two.statistic == "Cohen's kappa"
    per = {c.category: c for c in two.per_category}
    assert per["science"].n_labels == 4 and per["sport"].figure.n == 8

    for doc, label in zip(ids[:4], ["sport", "politics", "politics", "science"]):
        _label(store, "carol", doc, cats[label])
    three = agw.annotator_agreement(store, corpus_id)
    assert three.cohen is None and three.statistic == "Fleiss' kappa"
    assert {(p.first, p.second): p.figure.n for p in three.pairs} == {
        ("alice", "bob"): 8, ("alice", "carol"): 4, ("bob", "carol"): 4}
    assert three.fleiss.n == 4 and "4 documents with another number" in three.fleiss.note  # 3 labels: 4 docs
    assert three.alpha.n == 8

    # a label given by accepting a suggestion in bulk is left out unless asked for
    (sug,) = db.add_suggestions(store, [{"document_id": ids[9], "category": "sport", "agent": "llm"}])
    db.accept_suggestions(store, [(sug, 1)], "alice", blind=True)
    _label(store, "bob", ids[9], cats["sport"])
    assert agw.annotator_agreement(store, corpus_id).n_bulk == 1
    assert agw.annotator_agreement(store, corpus_id).alpha.n == 8
    counted = agw.annotator_agreement(store, corpus_id, include_bulk=True)
    assert (counted.n_bulk, counted.alpha.n) == (0, 9)


def test_degenerate_teams_say_why_there_is_no_figure(store: db.Store) -> None:
    corpus_id, ids, cats = _corpus(store, 3)
    assert agw.annotator_agreement(store, corpus_id).notes == [
        "Agreement needs two annotators who labelled blind; nobody has yet."]
    _label(store, "alice", ids[0], cats["sport"])
    assert "only 'alice' has yet" in agw.annotator_agreement(store, corpus_id).notes[0]
    _label(store, "bob", ids[1], cats["sport"])
    assert "No document has labels from two annotators yet" in agw.annotator_agreement(store, corpus_id).notes[0]
    _label(store, "bob", ids[0], cats["sport"])
    same = agw.annotator_agreement(store, corpus_id)
    assert same.notes == [] and same.cohen.value is None and "'sport'" in same.cohen.note
    assert same.alpha.value is None and same.fleiss.value is None


@pytest.mark.every_backend
def test_disagreements_and_adjudication(store: db.Store) -> None:
    corpus_id, ids, cats = _corpus(store, 3)
    _label(store, "alice", ids[0], cats["sport"])
    _label(store, "bob", ids[0], cats["politics"])
    _label(store, "alice", ids[1], cats["science"])
    _label(store, "bob", ids[1], cats["science"])
    (item,) = agw.disagreements(store, corpus_id)
    assert (item.document_id, item.labels, item.label, item.open) == (
        ids[0], {"alice": "sport", "bob": "politics"}, "politics", True)

    message = agw.adjudicate(store, ids[0], "sport", " Judge  Dredd ", expected_version=item.version, note="rule 4")
    assert message == "Adjudicated 'Doc 0': its label is 'sport' now (by 'Judge Dredd')."
    assert db.get_document(store, ids[0]).label == "sport"
    assert agw.disagreements(store, corpus_id, include_adjudicated=False) == []
    (done,) = agw.disagreements(store, corpus_id)
    adj = done.adjudication
    assert (adj.category, adj.adjudicator, adj.note, done.reopened) == ("sport", "Judge Dredd", "rule 4", False)
    assert adj.created_at is not None

    _label(store, "bob", ids[0], cats["science"])  # bob revises his label: the adjudication stands, reopened
    (reopened,) = agw.disagreements(store, corpus_id, include_adjudicated=False)
    assert reopened.reopened and reopened.label == "sport"

    db.update_document(store, ids[0], text="edited", expected_version=reopened.version, editor="ed")
    with pytest.raises(db.VersionConflictError, match="edited by 'ed'"):
        agw.adjudicate(store, ids[0], "science", "judge", expected_version=reopened.version)
    with pytest.raises(ValueError, match="not a category"):
        agw.adjudicate(store, ids[0], "cooking", "judge", expected_version=reopened.version + 1)
    with pytest.raises(ValueError, match="reserved"):
        agw.adjudicate(store, ids[0], "sport", "import", expected_version=reopened.version + 1)


@pytest.mark.parametrize("name, message", [
    ("", "Type a name"), ("   ", "Type a name"), ("a" * 81, "81 characters"), ("ali\nce", "control or invisible"),
    ("bob\u200b", "control or invisible"), ("Import", "reserved"),
])
def test_bad_annotator_names_are_refused(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        agw.clean_annotator_name(name)


def test_names_are_cleaned_and_a_team_names_each_once() -> None:
    assert agw.clean_annotator_name("  Ana \t María ") == "Ana María"
    assert agw.clean_annotator_name("<b>eve</b> & co") == "<b>eve</b> & co"  # kept as typed, escaped when shown
    assert agw.parse_team_names("alice, bob\n\ncarol") == ["alice", "bob", "carol"]
    with pytest.raises(ValueError, match="Line 2: 'Alice' is named twice"):
        agw.parse_team_names("alice\nAlice")
    with pytest.raises(ValueError, match="Line 1: .*reserved"):
        agw.parse_team_names("import")
    with pytest.raises(ValueError, match="at least one"):
        agw.parse_team_names("\n ,\n")


def test_suggestion_agreement_counts_bulk_apart(store: db.Store) -> None:
    corpus_id, ids, cats = _corpus(store, 3)
    sugs = db.add_suggestions(store, [{"document_id": d, "category": "sport", "agent": "llm"} for d in ids])
    aw.accept_rows(store, aw.bulk_rows(store, ids[:2]), "ann")
    db.decide_label(store, ids[2], cats["politics"], "ann", 1, suggestion_id=None)
    result = agw.suggestion_agreement(store, corpus_id)
    assert (result.n, result.n_agree, result.n_bulk, result.n_bulk_agree) == (1, 0, 2, 2)
    assert Counter(d.method for i in ids for d in db.list_decisions(store, i)) == {"bulk": 2, "review": 1}
    assert len(sugs) == 3


@pytest.mark.every_backend
def test_annotators_labelling_at_once_get_what_one_at_a_time_gets(store: db.Store) -> None:
    """Three annotators label the same eight documents in three threads released together, each document seen at
    version 1: every label is stored (a colleague's never conflicts), no version moves, and the figures equal
    those of the same labels stored one at a time in another corpus."""
    from tests.support.concurrency import in_threads

    plan = {"alice": ["sport", "politics"] * 4, "bob": ["sport", "sport", "politics", "science"] * 2,
            "carol": ["politics", "politics", "science", "science"] * 2}
    together, ids, cats = _corpus(store, 8, "Together")
    step = {name: iter(range(8)) for name in plan}

    def label_next(name: str):
        def task() -> int:
            i = next(step[name])
            return db.decide_label(store, ids[i], cats[plan[name][i]], name, 1, blind=True)
        return task

    results = in_threads([label_next(name) for name in plan], rounds=8)
    assert results == [[1] * 8] * 3  # no conflict, no version moved
    alone, alone_ids, alone_cats = _corpus(store, 8, "One at a time")
    for name, labels in plan.items():
        for doc, label in zip(alone_ids, labels):
            db.decide_label(store, doc, alone_cats[label], name, 1, blind=True)
    a, b = agw.annotator_agreement(store, together), agw.annotator_agreement(store, alone)
    assert (a.fleiss, a.alpha, [p.figure for p in a.pairs]) == (b.fleiss, b.alpha, [p.figure for p in b.pairs])
    assert a.fleiss.n == 8 and a.n_labels == 24
