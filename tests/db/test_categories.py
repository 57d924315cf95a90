"""Merging and deleting categories in the store (``db.categories.merge_category``, ``db.delete_category``,
``db.categories.category_usage``): labels move or go in one transaction, documents keep or lose their label as
counted, queries whose ground truth's categories changed are flagged (their ground truth kept), stored
evaluation results are untouched, and a change made after the user counted the labels is refused whole."""

from __future__ import annotations

import pytest

import db
from db import Store
from db.categories import category_usage, merge_category


def _corpus(store: Store) -> tuple[db.CorpusInfo, dict[str, int], list[int]]:
    """Corpus 'Sci' with categories Physics, physics, Chem and five documents:
    d0 decided Physics; d1 decided physics; d2 suggested physics; d3 decided Chem then physics (latest);
    d4 unlabelled."""
    corpus = db.create_corpus(store, "Sci")
    cats = {c.name: c.id for c in db.add_categories(store, corpus.id, ["Physics", "physics", "Chem"])}
    docs = db.add_documents(store, corpus.id, [{"title": f"D{i}", "text": f"text {i}"} for i in range(5)]).document_ids
    db.decide_label(store, docs[0], cats["Physics"], "ann", expected_version=1)
    db.decide_label(store, docs[1], cats["physics"], "ann", expected_version=1)
    db.add_suggestions(store, [{"document_id": docs[2], "category_id": cats["physics"], "agent": "llm"}])
    version = db.decide_label(store, docs[3], cats["Chem"], "ann", expected_version=1)
    db.decide_label(store, docs[3], cats["physics"], "bob", expected_version=version)
    return corpus, cats, docs


def _labels(store: Store, corpus_id: int, docs: list[int]) -> list[str | None]:
    labels = db.effective_labels(store, corpus_id)
    return [labels[d].category if d in labels else None for d in docs]


def _queries(store: Store, corpus_id: int, docs: list[int]) -> tuple[int, list[int]]:
    """A query set with q0 = [d0, d1] (Physics + physics), q1 = [d0, d4], q2 = [d3, d4]."""
    qs = db.create_query_set(store, corpus_id, "Q")
    ids = db.add_queries(store, qs.id, [{"text": "a", "ground_truth": [docs[0], docs[1]]},
                                        {"text": "b", "ground_truth": [docs[0], docs[4]]},
                                        {"text": "c", "ground_truth": [docs[3], docs[4]]}])
    return qs.id, ids


def test_usage_counts_labelled_documents_rows_and_queries(store: Store) -> None:
    corpus, cats, docs = _corpus(store)
    _, qids = _queries(store, corpus.id, docs)
    usage = category_usage(store, cats["physics"])
    # d1 (decision), d2 (suggestion), d3 (latest decision): 3 labelled, 2 by a decision; decisions d1, d3 (bob)
    assert (usage.n_labelled, usage.n_decided, usage.n_decisions, usage.n_suggestions) == (3, 2, 2, 1)
    assert usage.query_ids == [qids[0], qids[2]]
    assert usage.labels_version == db.get_corpus(store, corpus.id).labels_version
    assert category_usage(store, cats["Chem"]).n_labelled == 0  # d3's Chem decision is not its label any more
    assert category_usage(store, cats["Chem"]).n_decisions == 1


def test_merge_moves_every_label_and_flags_queries_whose_aspects_now_share_a_category(store: Store) -> None:
    corpus, cats, docs = _corpus(store)
    _, qids = _queries(store, corpus.id, docs)
    version = db.get_corpus(store, corpus.id).labels_version
    done = merge_category(store, cats["physics"], cats["Physics"], expected_labels_version=version)
    assert (done.name, done.merged_into, done.n_decisions, done.n_suggestions, done.n_relabelled) == (
        "physics", "Physics", 2, 1, 3)
    assert [c.name for c in db.list_categories(store, corpus.id)] == ["Chem", "Physics"]
    assert _labels(store, corpus.id, docs) == ["Physics", "Physics", "Physics", "Physics", None]
    assert [d.category for d in db.list_decisions(store, docs[3])] == ["Chem", "Physics"]  # history kept
    assert db.get_corpus(store, corpus.id).labels_version == version + 1
    assert done.flagged_queries == [qids[0]]  # q0's two aspects were Physics and physics; q2 had only physics
    q0, q1, q2 = (db.get_query(store, q) for q in qids)
    assert (q0.status, q0.ground_truth) == ("flagged", [docs[0], docs[1]])
    assert q0.error == (f"category 'physics' was merged into 'Physics': ground-truth documents #{docs[0]}, "
                        f"#{docs[1]} now share one category")
    assert (q1.status, q1.error, q2.status, q2.error) == ("ok", "", "ok", "")


def test_merge_can_take_the_typed_spelling_and_keeps_a_description(store: Store) -> None:
    corpus, cats, docs = _corpus(store)
    db.update_category(store, cats["physics"], description="matter and energy")
    done = merge_category(store, cats["Physics"], cats["physics"], new_name="Physics")
    assert done.merged_into == "Physics"
    assert [(c.id, c.name, c.description) for c in db.list_categories(store, corpus.id)] == [
        (cats["Chem"], "Chem", ""), (cats["physics"], "Physics", "matter and energy")]
    assert _labels(store, corpus.id, docs) == ["Physics", "Physics", "Physics", "Physics", None]


def test_delete_drops_the_labels_and_flags_queries_whose_document_lost_its_category(store: Store) -> None:
    corpus, cats, docs = _corpus(store)
    qs_id, qids = _queries(store, corpus.id, docs)
    run = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs_id, config={"k_max": 2})
    done = db.delete_category(store, cats["physics"])
    # d1, d2 have no other label; d3 falls back to its earlier Chem decision
    assert (done.merged_into, done.n_decisions, done.n_suggestions, done.n_unlabelled, done.n_fallback) == (
        None, 2, 1, 2, 1)
    assert _labels(store, corpus.id, docs) == ["Physics", None, None, "Chem", None]
    assert done.flagged_queries == [qids[0], qids[2]]
    q0, q2 = db.get_query(store, qids[0]), db.get_query(store, qids[2])
    assert (q0.status, q0.ground_truth) == ("flagged", [docs[0], docs[1]])  # ground truth kept
    assert q0.error == (f"ground-truth document 'D1' (#{docs[1]}) lost its category 'physics' (the category was "
                        "deleted)")
    assert q2.status == "flagged" and f"'D3' (#{docs[3]})" in q2.error
    assert db.get_eval_run(store, run.id).status == "running"  # the evaluation run is not touched


def test_a_change_after_counting_is_refused_and_nothing_is_changed(store: Store) -> None:
    corpus, cats, docs = _corpus(store)
    seen = category_usage(store, cats["physics"]).labels_version
    db.decide_label(store, docs[4], cats["physics"], "eve", expected_version=1)  # labelled meanwhile
    for change in (lambda: db.delete_category(store, cats["physics"], expected_labels_version=seen),
                   lambda: merge_category(store, cats["physics"], cats["Physics"], expected_labels_version=seen)):
        with pytest.raises(db.StoreError, match="changed since they were counted"):
            change()
    assert len(db.list_categories(store, corpus.id)) == 3
    assert _labels(store, corpus.id, docs) == ["Physics", "physics", "physics", "physics", "physics"]


def test_a_merge_that_cannot_be_done_changes_nothing(store: Store) -> None:
    corpus, cats, docs = _corpus(store)
    other = db.create_corpus(store, "Other")
    (foreign,) = db.add_categories(store, other.id, ["Physics"])
    with pytest.raises(db.InvalidInputError, match="same corpus"):
        merge_category(store, cats["physics"], foreign.id)
    with pytest.raises(db.InvalidInputError, match="same corpus"):
        merge_category(store, cats["physics"], cats["physics"])
    with pytest.raises(db.DuplicateError, match="'Chem'"):
        merge_category(store, cats["physics"], cats["Physics"], new_name="Chem")
    assert len(db.list_categories(store, corpus.id)) == 3
    assert _labels(store, corpus.id, docs) == ["Physics", "physics", "physics", "physics", None]
