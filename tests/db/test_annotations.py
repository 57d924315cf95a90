"""Suggestions, decisions (optimistic locking), effective labels, review queue, agreement."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import db
from db import Store


def test_suggestions_round_trip(store: Store, docs: list[int], cats: dict[str, int]) -> None:
    ids = db.add_suggestions(
        store,
        [
            {"document_id": docs[0], "category": "sport", "agent": "llm", "model_version": "v1",
             "score": 0.75, "reason": "mentions a match"},
            {"document_id": docs[0], "category_id": cats["science"], "agent": "knn"},
            {"document_id": docs[1], "agent": "llm", "model_version": "v1", "error": "timeout"},
        ],
    )
    assert len(ids) == 3 and ids == sorted(ids)
    first, second = db.list_suggestions(store, docs[0])
    assert (first.id, first.category, first.status, first.agent, first.model_version) == (
        ids[0], "sport", "ok", "llm", "v1",
    )
    assert (first.score, first.reason) == (0.75, "mentions a match")
    assert (second.category_id, second.score) == (cats["science"], None)
    (failed,) = db.list_suggestions(store, docs[1])
    assert (failed.status, failed.category_id, failed.error) == ("failed", None, "timeout")


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"category": "sport"}, "no agent"),
        ({"agent": "llm", "status": "ok"}, "no category"),
        ({"agent": "llm", "category": "cooking"}, "'cooking'"),
        ({"agent": "llm", "category": "sport", "status": "failed"}, "'failed' but a category"),
        ({"agent": "llm", "category": "sport", "status": "maybe"}, "status must be"),
    ],
)
def test_bad_suggestion_rejects_the_whole_batch(
    store: Store, docs: list[int], bad: dict[str, object], message: str,
    count_rows: Callable[[str], int],
) -> None:
    good = {"document_id": docs[0], "category": "sport", "agent": "llm"}
    with pytest.raises(db.InvalidInputError, match=message):
        db.add_suggestions(store, [good, {"document_id": docs[1], **bad}])
    assert count_rows("suggestions") == 0


def test_suggestion_category_must_belong_to_the_documents_corpus(
    store: Store, docs: list[int]
) -> None:
    other = db.create_corpus(store, "Other")
    (foreign,) = db.add_categories(store, other.id, ["sport"])
    with pytest.raises(db.InvalidInputError, match="not a category"):
        db.add_suggestions(store, [{"document_id": docs[0], "category_id": foreign.id, "agent": "a"}])
    with pytest.raises(db.NotFoundError):
        db.add_suggestions(store, [{"document_id": 999, "category": "sport", "agent": "a"}])


def test_documents_without_suggestion_supports_resume(
    store: Store, corpus: db.CorpusInfo, docs: list[int],
) -> None:
    assert db.documents_without_suggestion(store, corpus.id, "llm", "v1") == docs
    db.add_suggestions(
        store,
        [
            {"document_id": docs[0], "category": "sport", "agent": "llm", "model_version": "v1"},
            {"document_id": docs[1], "agent": "llm", "model_version": "v1", "error": "rate limit"},
            {"document_id": docs[2], "category": "sport", "agent": "llm", "model_version": "v0"},
            {"document_id": docs[3], "category": "sport", "agent": "other", "model_version": "v1"},
        ],
    )
    assert db.documents_without_suggestion(store, corpus.id, "llm", "v1") == docs[1:]
    assert db.documents_without_suggestion(store, corpus.id, "llm", "v1", retry_failed=False) == docs[2:]
    assert db.documents_without_suggestion(store, corpus.id, "llm", "v0") == [docs[0], docs[1], docs[3]]


def test_decide_label_bumps_version_and_keeps_history(
    store: Store, corpus: db.CorpusInfo, docs: list[int], cats: dict[str, int]
) -> None:
    labels_before = db.get_corpus(store, corpus.id).labels_version
    assert db.decide_label(store, docs[0], cats["sport"], "alice", expected_version=1, note="obvious") == 2
    assert db.decide_label(store, docs[0], cats["politics"], "bob", expected_version=2) == 3
    history = db.list_decisions(store, docs[0])
    assert [(d.category, d.annotator, d.based_on_version) for d in history] == [
        ("sport", "alice", 1), ("politics", "bob", 2),
    ]
    assert history[0].note == "obvious"
    row = db.get_document(store, docs[0])
    assert (row.version, row.label, row.label_source) == (3, "politics", "decision")
    info = db.get_corpus(store, corpus.id)
    assert info.labels_version == labels_before + 2
    assert info.version == corpus.version  # label changes do not stale embeddings


def test_second_annotator_on_a_stale_version_is_refused(
    store: Store, docs: list[int], cats: dict[str, int]
) -> None:
    seen_by_alice = db.get_document(store, docs[0]).version
    seen_by_bob = db.get_document(store, docs[0]).version
    assert db.decide_label(store, docs[0], cats["sport"], "alice", seen_by_alice) == 2

    with pytest.raises(db.VersionConflictError) as caught:
        db.decide_label(store, docs[0], cats["politics"], "bob", seen_by_bob)
    error = caught.value
    assert (error.document_id, error.expected_version, error.actual_version) == (docs[0], 1, 2)
    assert error.changed_by == "alice" and error.changed_at is not None
    assert "alice" in str(error) and "version 1" in str(error) and "version 2" in str(error)

    assert [d.annotator for d in db.list_decisions(store, docs[0])] == ["alice"]
    assert db.get_document(store, docs[0]).label == "sport"
    # After reloading, bob can overrule.
    assert db.decide_label(store, docs[0], cats["politics"], "bob", 2) == 3


def test_a_conflict_names_the_change_that_made_the_current_version(store: Store, corpus: db.CorpusInfo) -> None:
    """A document imported with a label (a decision by 'import'), then its text edited: a decision based on the
    version before the edit named 'import' as the one who changed it. It names the edit now; a later decision is
    named as the latest change again, with its category; an edit of title and text says both."""
    (doc,) = db.add_documents(store, corpus.id, [{"title": "T", "text": "old text", "label": "sport"}]).document_ids
    seen = db.get_document(store, doc).version
    db.update_document(store, doc, text="new text", expected_version=seen, editor="bob")
    sport = next(c.id for c in db.list_categories(store, corpus.id) if c.name == "sport")
    with pytest.raises(db.VersionConflictError) as caught:
        db.decide_label(store, doc, sport, "carol", seen)
    message = str(caught.value)
    assert message.startswith(f"Document {doc}: its text was edited by 'bob' at ")
    assert message.endswith(f"after you loaded it (you saw version {seen}, it is now version {seen + 1}). Reload "
                            "the document and try again.")
    assert "import" not in message and caught.value.changed_by == "bob"
    db.decide_label(store, doc, sport, "dave", seen + 1)
    with pytest.raises(db.VersionConflictError, match=f"Document {doc} was labelled 'sport' by 'dave' at "):
        db.update_document(store, doc, title="New", expected_version=seen + 1)
    db.update_document(store, doc, title="New title", text="newer text")  # no editor given
    with pytest.raises(db.VersionConflictError, match=f"Document {doc}: its title and text were edited at "):
        db.delete_document(store, doc, expected_version=seen + 2)


def test_decide_label_validation(store: Store, docs: list[int], cats: dict[str, int]) -> None:
    other = db.create_corpus(store, "Other")
    (foreign,) = db.add_categories(store, other.id, ["x"])
    with pytest.raises(db.NotFoundError):
        db.decide_label(store, 999, cats["sport"], "a", 1)
    with pytest.raises(db.InvalidInputError, match="not a category"):
        db.decide_label(store, docs[0], foreign.id, "a", 1)
    (sug,) = db.add_suggestions(store, [{"document_id": docs[1], "category": "sport", "agent": "l"}])
    with pytest.raises(db.InvalidInputError, match="not a suggestion for document"):
        db.decide_label(store, docs[0], cats["sport"], "a", 1, suggestion_id=sug)
    with pytest.raises(db.InvalidInputError, match="annotator"):
        db.decide_label(store, docs[0], cats["sport"], "  ", 1)
    assert db.get_document(store, docs[0]).version == 1


def test_bulk_accept_is_all_or_nothing_or_skips_conflicts(
    store: Store, docs: list[int], cats: dict[str, int], count_rows: Callable[[str], int]
) -> None:
    sugs = db.add_suggestions(
        store,
        [{"document_id": d, "category": c, "agent": "llm", "score": 0.9}
         for d, c in zip(docs[:3], ["sport", "politics", "science"], strict=True)],
    )
    db.decide_label(store, docs[2], cats["sport"], "carol", 1)  # docs[2] is now at version 2

    with pytest.raises(db.VersionConflictError, match="carol"):
        db.accept_suggestions(store, [(s, 1) for s in sugs], "dave")
    assert count_rows("decisions") == 1
    assert [db.get_document(store, d).version for d in docs[:3]] == [1, 1, 2]

    result = db.accept_suggestions(store, [(s, 1) for s in sugs], "dave", on_conflict="skip")
    assert result.new_versions == {docs[0]: 2, docs[1]: 2}
    assert [c.document_id for c in result.conflicts] == [docs[2]]
    accepted = db.list_decisions(store, docs[1])
    assert [(d.category, d.annotator, d.suggestion_id) for d in accepted] == [("politics", "dave", sugs[1])]
    assert db.get_document(store, docs[2]).label == "sport"  # carol's decision stands


def test_generic_bulk_decisions(store: Store, docs: list[int], cats: dict[str, int]) -> None:
    result = db.decide_labels(
        store,
        [db.DecisionIn(docs[0], cats["sport"], 1), db.DecisionIn(docs[1], cats["science"], 1, note="n")],
        "erin",
    )
    assert result.new_versions == {docs[0]: 2, docs[1]: 2} and result.conflicts == []
    assert [db.get_document(store, d).label for d in docs[:2]] == ["sport", "science"]


def test_failed_suggestions_cannot_be_accepted(store: Store, docs: list[int]) -> None:
    (sug,) = db.add_suggestions(store, [{"document_id": docs[0], "agent": "llm", "error": "x"}])
    with pytest.raises(db.InvalidInputError, match="failed"):
        db.accept_suggestions(store, [(sug, 1)], "a")


def test_effective_label_precedence(
    store: Store, corpus: db.CorpusInfo, docs: list[int], cats: dict[str, int],
) -> None:
    db.add_suggestions(
        store,
        [
            {"document_id": docs[0], "category": "sport", "agent": "llm"},
            {"document_id": docs[0], "category": "science", "agent": "llm"},  # newer wins
            {"document_id": docs[0], "agent": "llm", "error": "later failure is ignored"},
            {"document_id": docs[1], "category": "sport", "agent": "llm"},
            {"document_id": docs[2], "agent": "llm", "error": "only a failure"},
        ],
    )
    db.decide_label(store, docs[1], cats["politics"], "alice", 1)
    labels = db.effective_labels(store, corpus.id)
    assert set(labels) == {docs[0], docs[1]}
    assert (labels[docs[0]].category, labels[docs[0]].source, labels[docs[0]].by) == ("science", "suggestion", "llm")
    assert (labels[docs[1]].category, labels[docs[1]].source, labels[docs[1]].by) == ("politics", "decision", "alice")
    assert db.effective_label(store, docs[2]) is None
    assert db.effective_label(store, docs[1]) == labels[docs[1]]
    assert db.category_counts(store, corpus.id) == {"politics": 1, "science": 1, "sport": 0}
    rows = db.list_documents(store, corpus.id).items
    assert [(r.label, r.label_source) for r in rows] == [
        ("science", "suggestion"), ("politics", "decision"), (None, None), (None, None),
    ]


@pytest.fixture
def review_setup(store: Store) -> tuple[int, list[int], dict[str, int]]:
    """Six documents:
    d1 llm:sport 0.9 + decided sport    d2 llm:sport 0.4 + decided politics
    d3 llm:politics 0.2                 d4 llm:science 0.95, then other:politics 0.1
    d5 decided science only             d6 nothing
    """
    c = db.create_corpus(store, "Review")
    cats = {x.name: x.id for x in db.add_categories(store, c.id, ["sport", "politics", "science"])}
    d = db.add_documents(store, c.id, [{"text": f"doc {i}"} for i in range(1, 7)]).document_ids
    db.add_suggestions(
        store,
        [
            {"document_id": d[0], "category": "sport", "agent": "llm", "score": 0.9},
            {"document_id": d[1], "category": "sport", "agent": "llm", "score": 0.4},
            {"document_id": d[2], "category": "politics", "agent": "llm", "score": 0.2},
            {"document_id": d[3], "category": "science", "agent": "llm", "score": 0.95},
            {"document_id": d[3], "category": "politics", "agent": "other", "score": 0.1},
        ],
    )
    db.decide_label(store, d[0], cats["sport"], "ann", 1)
    db.decide_label(store, d[1], cats["politics"], "ann", 1)
    db.decide_label(store, d[4], cats["science"], "ann", 1)
    return c.id, d, cats


def test_review_queue_filters(
    store: Store, review_setup: tuple[int, list[int], dict[str, int]],
) -> None:
    cid, d, cats = review_setup

    def queue(**kw: object) -> list[int]:
        return db.review_queue(store, cid, **kw)  # type: ignore[arg-type]

    assert queue() == d
    assert queue(unreviewed=True) == [d[2], d[3], d[5]]
    assert queue(disagreement=True) == [d[1]]
    assert queue(max_score=0.5) == [d[1], d[2], d[3]]  # d4's latest is other:0.1
    assert queue(max_score=0.5, agent="llm") == [d[1], d[2]]
    assert queue(agent="llm") == d[:4]
    assert queue(agent="other") == [d[3]]
    assert queue(category_id=cats["politics"]) == [d[1], d[2], d[3]]
    assert queue(category_id=cats["politics"], agent="llm") == [d[1], d[2]]
    assert queue(category_id=cats["science"]) == [d[4]]
    assert queue(unreviewed=True, max_score=0.5, agent="llm") == [d[2]]
    assert queue(limit=2) == d[:2]
    # Resolving the disagreement removes d2 from that queue.
    db.decide_label(store, d[1], cats["sport"], "ann", 2)
    assert queue(disagreement=True) == []


def test_agreement_numbers(store: Store) -> None:
    c = db.create_corpus(store, "Agree")
    cats = {x.name: x.id for x in db.add_categories(store, c.id, ["A", "B", "C"])}
    d = db.add_documents(store, c.id, [{"text": f"doc {i}"} for i in range(1, 10)]).document_ids

    def suggest(doc: int, cat: str, agent: str = "llm") -> None:
        db.add_suggestions(store, [{"document_id": doc, "category": cat, "agent": agent}])

    def decide(doc: int, cat: str) -> None:
        db.decide_label(store, doc, cats[cat], "ann", db.get_document(store, doc).version)

    # (latest suggestion, latest decision):
    suggest(d[0], "A"); decide(d[0], "A")                     # A/A
    suggest(d[1], "A"); decide(d[1], "A")                     # A/A
    suggest(d[2], "A"); decide(d[2], "B")                     # A/B
    suggest(d[3], "B"); decide(d[3], "B")                     # B/B
    db.add_suggestions(store, [{"document_id": d[3], "agent": "llm", "error": "ignored"}])
    suggest(d[4], "C"); decide(d[4], "B")                     # C/B
    suggest(d[5], "B")                                        # not decided: not compared
    decide(d[6], "A")                                         # no suggestion: not compared
    suggest(d[7], "A"); suggest(d[7], "C"); decide(d[7], "C")  # latest suggestion C: C/C
    suggest(d[8], "B"); decide(d[8], "A"); decide(d[8], "B")   # latest decision B: B/B
    suggest(d[8], "A", agent="human-ish")                    # other agent, newest

    overall = db.agreement(store, c.id, agent="llm")
    assert (overall.n, overall.n_agree) == (7, 5)
    assert overall.accuracy == pytest.approx(5 / 7)
    per = {k: (v.n, v.n_agree) for k, v in overall.per_category.items()}
    assert per == {"A": (2, 2), "B": (4, 2), "C": (1, 1)}
    assert overall.per_category["B"].accuracy == 0.5
    assert overall.confusion == {"A": {"A": 2, "B": 1}, "B": {"B": 2}, "C": {"B": 1, "C": 1}}
    assert overall.pairs == [("A", "A", 2), ("A", "B", 1), ("B", "B", 2), ("C", "B", 1), ("C", "C", 1)]

    # Without an agent filter d9's newest suggestion (A, other agent) disagrees with B.
    any_agent = db.agreement(store, c.id)
    assert (any_agent.n, any_agent.n_agree) == (7, 4)
    assert any_agent.confusion["A"] == {"A": 2, "B": 2}

    empty = db.agreement(store, c.id, agent="nobody")
    assert (empty.n, empty.accuracy, empty.per_category["A"].accuracy) == (0, None, None)


def test_suggestion_agents_lists_distinct_agents_with_counts(
    store: Store, corpus: db.CorpusInfo, docs: list[int]
) -> None:
    assert db.suggestion_agents(store, corpus.id) == []
    other = db.create_corpus(store, "Other")
    db.add_categories(store, other.id, ["sport"])
    (other_doc,) = db.add_documents(store, other.id, [{"text": "elsewhere"}]).document_ids
    db.add_suggestions(
        store,
        [
            {"document_id": docs[0], "category": "sport", "agent": "zero-shot:minilm", "model_version": "a"},
            {"document_id": docs[1], "category": "science", "agent": "zero-shot:minilm", "model_version": "a"},
            {"document_id": docs[1], "category": "sport", "agent": "zero-shot:minilm", "model_version": "b"},
            {"document_id": docs[2], "agent": "llm:gpt", "model_version": "v1", "error": "timeout"},
            {"document_id": docs[3], "category": "politics", "agent": "llm:gpt", "model_version": "v1"},
            {"document_id": other_doc, "category": "sport", "agent": "only-elsewhere"},
        ],
    )
    agents = db.suggestion_agents(store, corpus.id)
    assert agents == [
        db.AgentInfo("llm:gpt", "v1", 2, 1),
        db.AgentInfo("zero-shot:minilm", "a", 2, 0),
        db.AgentInfo("zero-shot:minilm", "b", 1, 0),
    ]
    assert db.suggestion_agents(store, other.id) == [db.AgentInfo("only-elsewhere", "", 1, 0)]
    assert db.suggestion_agents(store, 10_000) == []
