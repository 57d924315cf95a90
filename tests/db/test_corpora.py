"""Corpora, categories and documents: round trips, dedupe, all-or-nothing import, listing."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import pytest

import db
import db.documents
from db import Store

# --------------------------------------------------------------------------- corpora


def test_corpus_round_trip_rename_and_list(store: Store) -> None:
    created = db.create_corpus(store, "  Wiki  ", "about things")
    assert (created.name, created.description, created.version) == ("Wiki", "about things", 1)
    assert created.created_at.tzinfo is not None and created.created_at.utcoffset().total_seconds() == 0
    assert db.get_corpus(store, created.id) == created
    assert db.get_corpus_by_name(store, "Wiki").id == created.id

    db.create_corpus(store, "Arxiv")
    renamed = db.rename_corpus(store, created.id, "Wikipedia", description="new text")
    assert (renamed.name, renamed.description) == ("Wikipedia", "new text")
    assert renamed.updated_at >= created.updated_at
    assert [c.name for c in db.list_corpora(store)] == ["Arxiv", "Wikipedia"]


def test_corpus_name_rules(store: Store) -> None:
    first = db.create_corpus(store, "A")
    db.create_corpus(store, "B")
    with pytest.raises(db.DuplicateError, match="'A' already exists"):
        db.create_corpus(store, "A")
    with pytest.raises(db.DuplicateError):
        db.rename_corpus(store, first.id, "B")
    with pytest.raises(db.InvalidInputError):
        db.create_corpus(store, "   ")
    with pytest.raises(db.NotFoundError, match="Corpus 999"):
        db.get_corpus(store, 999)
    assert db.rename_corpus(store, first.id, "A").name == "A"  # same name is fine


def test_names_differing_only_in_case_or_accents_are_different(store: Store) -> None:
    """Exact names on every backend (on MySQL the tables' binary collation, not the database default)."""
    ids = {name: db.create_corpus(store, name).id for name in ("News", "news", "Névs")}
    assert len(set(ids.values())) == 3
    assert {name: db.get_corpus_by_name(store, name).id for name in ids} == ids
    db.add_categories(store, ids["News"], ["Sport", "sport", "spört"])
    assert sorted(c.name for c in db.list_categories(store, ids["News"])) == ["Sport", "sport", "spört"]


def test_corpora_and_categories_are_listed_in_the_same_human_order_on_every_backend(store: Store) -> None:
    names = ["beta", "Zebra", "alpha", "Ärger", "Alpha", "zeta", "Éclair", "eclair"]
    expected = ["Alpha", "alpha", "Ärger", "beta", "eclair", "Éclair", "Zebra", "zeta"]
    for name in names:
        db.create_corpus(store, name)
    assert [c.name for c in db.list_corpora(store)] == expected
    corpus = db.get_corpus_by_name(store, "beta")
    db.add_categories(store, corpus.id, names)
    assert [c.name for c in db.list_categories(store, corpus.id)] == expected
    assert list(db.category_counts(store, corpus.id)) == expected


def test_delete_corpus_removes_everything_it_owns(
    store: Store, corpus: db.CorpusInfo, docs: list[int], cats: dict[str, int],
    count_rows: Callable[[str], int],
) -> None:
    other = db.create_corpus(store, "Other")
    db.add_documents(store, other.id, [{"text": "kept", "label": "x"}])
    db.decide_label(store, docs[0], cats["sport"], "ann", expected_version=1)
    db.add_suggestions(store, [{"document_id": docs[1], "category": "politics", "agent": "llm"}])
    qs = db.create_query_set(store, corpus.id, "q")
    q_ids = db.add_queries(store, qs.id, [{"text": "q?", "ground_truth": docs[:2]}])
    run = db.create_embedding_run(
        store, corpus.id, model_name="m", layer=0, pooling="mean", n_heads=1, head_dim=2, dim=2
    )
    db.save_vectors(store, run.id, docs, np.ones((4, 2)), np.ones((4, 1, 2)))
    db.save_projection(store, run.id, "standard", "pca", np.zeros((4, 2)), docs)
    ev = db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id, embedding_run_id=run.id)
    db.save_eval_results(
        store, ev.id, [{"strategy": "s", "query_id": q_ids[0], "retrieved": [1], "rsr": [1.0], "csr": [1.0]}]
    )

    db.add_queries(store, db.create_query_set(store, corpus.id, "q2").id, [{"text": "a?"}, {"text": "b?"}])

    feet = db.corpus_footprints(store)
    # 4 vectors of (2 standard + 1 head x 2) float32 = 4 x 16 bytes; 1 + 2 queries in 2 sets.
    assert feet[corpus.id] == db.CorpusFootprint(corpus.id, n_query_sets=2, n_queries=3, n_indexes=1,
                                                 vector_bytes=64, n_eval_runs=1)
    assert feet[other.id] == db.CorpusFootprint(other.id, 0, 0, 0, 0, 0)

    db.delete_corpus(store, corpus.id)

    assert [c.name for c in db.list_corpora(store)] == ["Other"]
    assert list(db.corpus_footprints(store)) == [other.id]
    assert count_rows("documents") == 1
    assert count_rows("categories") == 1
    assert count_rows("decisions") == 1  # the other corpus' import label
    for table in (
        "suggestions", "query_sets", "queries", "query_ground_truth", "embedding_runs",
        "embedding_vectors", "projections", "eval_runs", "eval_results",
    ):
        assert count_rows(table) == 0, table
    with pytest.raises(db.NotFoundError):
        db.delete_corpus(store, corpus.id)


# --------------------------------------------------------------------------- categories


def test_categories_are_idempotent_and_editable(store: Store) -> None:
    c = db.create_corpus(store, "C")
    first = db.add_categories(store, c.id, ["b", {"name": "a", "description": "letter a"}])
    again = db.add_categories(store, c.id, ["a", "c"])
    assert again[0].id == first[1].id
    assert [(x.name, x.description) for x in db.list_categories(store, c.id)] == [
        ("a", "letter a"), ("b", ""), ("c", ""),
    ]
    with pytest.raises(db.DuplicateError):
        db.update_category(store, first[0].id, name="a")
    updated = db.update_category(store, first[0].id, name="bee", description="insect")
    assert (updated.name, updated.description) == ("bee", "insect")
    labels_before = db.get_corpus(store, c.id).labels_version
    db.delete_category(store, updated.id)
    assert [x.name for x in db.list_categories(store, c.id)] == ["a", "c"]
    assert db.get_corpus(store, c.id).labels_version == labels_before + 1
    assert db.get_corpus(store, c.id).version == 1  # labels do not touch the documents version


def test_deleting_a_category_removes_its_labels(
    store: Store, corpus: db.CorpusInfo, docs: list[int], cats: dict[str, int],
) -> None:
    db.decide_label(store, docs[0], cats["sport"], "ann", expected_version=1)
    db.delete_category(store, cats["sport"])
    assert db.get_document(store, docs[0]).label is None
    assert db.list_decisions(store, docs[0]) == []


# --------------------------------------------------------------------------- documents


def test_add_documents_round_trip_and_dedupe(store: Store) -> None:
    c = db.create_corpus(store, "C")
    result = db.add_documents(
        store,
        c.id,
        [
            {"title": "One", "text": "first text", "source": "a.csv"},
            {"title": "Two", "text": "second text"},
            {"title": "One again", "text": "first text"},  # duplicate inside the batch
        ],
    )
    assert (result.added, result.skipped_duplicates, result.duplicate_indices) == (2, 1, [2])
    info = db.get_corpus(store, c.id)
    assert (info.version, info.n_documents) == (2, 2)

    rows = db.get_documents(store, result.document_ids[::-1])
    assert [r.title for r in rows] == ["Two", "One"]  # order asked for
    one = rows[1]
    assert one.text == "first text" and one.source == "a.csv" and one.version == 1
    assert one.content_hash == hashlib.sha256(b"first text").hexdigest()
    assert one.label is None and one.label_source is None

    again = db.add_documents(store, c.id, [{"text": "second text"}, {"text": "third text"}])
    assert (again.added, again.skipped_duplicates) == (1, 1)
    assert db.get_corpus(store, c.id).version == 3
    nothing_new = db.add_documents(store, c.id, [{"text": "third text"}])
    assert (nothing_new.added, nothing_new.skipped_duplicates) == (0, 1)
    assert db.get_corpus(store, c.id).version == 3  # no change, no bump


def test_corpus_content_hash_tracks_the_document_set(store: Store) -> None:
    a = db.create_corpus(store, "A")
    b = db.create_corpus(store, "B")
    db.add_documents(store, a.id, [{"text": "x"}, {"text": "y"}])
    db.add_documents(store, b.id, [{"text": "y"}])
    assert db.get_corpus(store, a.id).content_hash != db.get_corpus(store, b.id).content_hash
    db.add_documents(store, b.id, [{"text": "x"}])  # same set, other order
    assert db.get_corpus(store, a.id).content_hash == db.get_corpus(store, b.id).content_hash


def test_duplicate_with_dedupe_off_stores_nothing(
    store: Store, count_rows: Callable[[str], int],
) -> None:
    c = db.create_corpus(store, "C")
    db.add_documents(store, c.id, [{"text": "exists"}])
    with pytest.raises(db.DuplicateError, match="#2"):
        db.add_documents(store, c.id, [{"text": "new"}, {"text": "exists"}], dedupe=False)
    assert count_rows("documents") == 1
    assert db.get_corpus(store, c.id).version == 2


def test_import_labels_become_decisions_by_import(store: Store) -> None:
    c = db.create_corpus(store, "C")
    db.add_categories(store, c.id, ["sport"])
    result = db.add_documents(
        store, c.id, [{"text": "goal!", "label": "sport"}, {"text": "vote", "label": "politics"}, {"text": "x"}]
    )
    assert [x.name for x in db.list_categories(store, c.id)] == ["politics", "sport"]
    goal, vote, plain = db.get_documents(store, result.document_ids)
    assert (goal.label, goal.label_source, goal.version) == ("sport", "decision", 2)
    assert (vote.label, plain.label, plain.version) == ("politics", None, 1)
    (decision,) = db.list_decisions(store, goal.id)
    assert (decision.annotator, decision.based_on_version) == (db.IMPORT_ANNOTATOR, 1)
    # The stored version is the one an annotator must quote next.
    assert db.decide_label(store, goal.id, decision.category_id, "ann", expected_version=2) == 3


def test_unknown_label_without_auto_create_is_refused(
    store: Store, count_rows: Callable[[str], int],
) -> None:
    c = db.create_corpus(store, "C")
    with pytest.raises(db.InvalidInputError, match="'nope'"):
        db.add_documents(store, c.id, [{"text": "a"}, {"text": "b", "label": "nope"}], create_missing_categories=False)
    assert count_rows("documents") == 0 and count_rows("categories") == 0


def test_failure_midway_leaves_nothing_behind(
    store: Store, count_rows: Callable[[str], int],
) -> None:
    c = db.create_corpus(store, "C")
    before = db.get_corpus(store, c.id)
    docs = [
        {"text": "fine", "label": "brand-new"},  # creates (and flushes) a category first
        {"text": "also fine"},
        {"text": "   "},  # invalid
    ]
    with pytest.raises(db.InvalidInputError, match="Document #3 has no text"):
        db.add_documents(store, c.id, docs)
    assert count_rows("documents") == 0
    assert count_rows("categories") == 0
    after = db.get_corpus(store, c.id)
    assert (after.version, after.labels_version) == (before.version, before.labels_version)


def test_failure_after_documents_were_inserted_rolls_them_back(
    store: Store, monkeypatch: pytest.MonkeyPatch, count_rows: Callable[[str], int]
) -> None:
    c = db.create_corpus(store, "C")

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(db.documents, "_record_import_labels", explode)
    with pytest.raises(RuntimeError):
        db.add_documents(store, c.id, [{"text": f"doc {i}", "label": "l"} for i in range(50)])
    assert count_rows("documents") == 0
    assert count_rows("decisions") == 0
    assert db.get_corpus(store, c.id).version == 1


def test_chunks_reference_their_parent(store: Store) -> None:
    c = db.create_corpus(store, "C")
    other = db.create_corpus(store, "Other")
    (parent,) = db.add_documents(store, c.id, [{"title": "Long", "text": "long doc"}]).document_ids
    chunks = db.add_documents(
        store, c.id, [{"text": f"chunk {i}", "parent_id": parent, "chunk_index": i} for i in range(3)]
    ).document_ids
    rows = db.get_documents(store, chunks)
    assert [(r.parent_id, r.chunk_index) for r in rows] == [(parent, 0), (parent, 1), (parent, 2)]
    assert [d.id for d in db.list_documents(store, c.id, top_level_only=True).items] == [parent]
    assert db.document_ids(store, c.id, top_level_only=True) == [parent]
    with pytest.raises(db.InvalidInputError, match="parent_id"):
        db.add_documents(store, other.id, [{"text": "x", "parent_id": parent}])
    db.delete_documents(store, c.id, [parent])
    assert db.document_ids(store, c.id) == []  # chunks go with their parent


def test_chunks_name_their_source_document(store: Store) -> None:
    c = db.create_corpus(store, "C")
    docs = [
        {"title": f"Rome (part {i + 1}/3)", "text": f"rome part {i}", "source": "a.csv row 2",
         "chunk_of": "Rome", "chunk_index": i, "chunk_count": 3, "label": "history"}
        for i in (2, 0, 1)
    ] + [
        {"title": "Paris (part 1/2)", "text": "paris part 0", "source": "a.csv row 3", "chunk_of": "Paris",
         "chunk_index": 0, "chunk_count": 2},
        {"title": "Whole", "text": "not chunked", "source": "a.csv row 4"},
    ]  # fmt: skip
    ids = db.add_documents(store, c.id, docs).document_ids
    rows = db.get_documents(store, ids)
    assert [(r.chunk_of, r.chunk_index, r.chunk_count) for r in rows] == [
        ("Rome", 2, 3), ("Rome", 0, 3), ("Rome", 1, 3), ("Paris", 0, 2), (None, None, None),
    ]
    assert rows[0].chunk_label == "chunk 3 of 3 of 'Rome'"
    assert rows[4].chunk_label is None
    # every chunk leads back to all chunks of its source document, in order
    assert [d.id for d in db.source_chunks(store, ids[2])] == [ids[1], ids[2], ids[0]]
    assert [d.id for d in db.source_chunks(store, ids[3])] == [ids[3]]
    assert [d.id for d in db.source_chunks(store, ids[4])] == [ids[4]]
    with pytest.raises(db.NotFoundError):
        db.source_chunks(store, 10_000)
    # chunks are ordinary retrievable documents: listed, labelled, counted
    assert db.get_corpus(store, c.id).n_documents == 5
    assert db.list_documents(store, c.id, top_level_only=True).total == 5


def test_list_documents_paging_filters_and_search(store: Store) -> None:
    c = db.create_corpus(store, "C")
    texts = ["100% sure", "100 percent", "a_b", "axb", "Sure thing", "plain", "Un été à Hanoï: Bánh da lợn"]
    ids = db.add_documents(
        store, c.id, [{"title": f"t{i}", "text": t, "label": "odd" if i % 2 else None} for i, t in enumerate(texts)]
    ).document_ids
    page = db.list_documents(store, c.id, offset=2, limit=2)
    assert (page.total, [d.id for d in page.items]) == (7, ids[2:4])
    assert len(db.list_documents(store, c.id, limit=None).items) == 7

    odd = db.list_categories(store, c.id)[0].id
    assert [d.id for d in db.list_documents(store, c.id, category_id=odd).items] == ids[1::2]
    assert [d.id for d in db.list_documents(store, c.id, unlabeled=True).items] == ids[0::2]

    def found(needle: str) -> list[str]:
        return [d.text for d in db.list_documents(store, c.id, search=needle).items]

    assert found("100%") == ["100% sure"]  # % is literal, not a wildcard
    assert found("a_b") == ["a_b"]  # _ is literal
    assert found("SURE") == ["100% sure", "Sure thing"]  # case-insensitive
    assert found("t5") == ["plain"]  # titles are searched too
    assert found("ÉTÉ À HANOÏ") == found("bÁnh DA LỢN") == [texts[6]]  # every script's case, not ASCII only
    assert found("'; DROP TABLE documents; --") == []
    assert db.list_documents(store, c.id, search="sure", category_id=odd).total == 0
    with pytest.raises(db.InvalidInputError):
        db.list_documents(store, c.id, offset=-1)


def test_update_document(store: Store) -> None:
    c = db.create_corpus(store, "C")
    a, b = db.add_documents(store, c.id, [{"text": "alpha"}, {"text": "beta"}]).document_ids
    version = db.get_corpus(store, c.id).version
    row = db.update_document(store, a, title="A title")
    assert row.title == "A title" and db.get_corpus(store, c.id).version == version
    row = db.update_document(store, a, text="gamma")
    assert row.content_hash == hashlib.sha256(b"gamma").hexdigest()
    assert db.get_corpus(store, c.id).version == version + 1
    with pytest.raises(db.DuplicateError):
        db.update_document(store, a, text="beta")
    with pytest.raises(db.NotFoundError):
        db.update_document(store, 999, title="x")
    for blank in ("", "  \n"):  # a title can be corrected, not erased; nothing of the edit is kept
        with pytest.raises(db.InvalidInputError, match="title must not be empty"):
            db.update_document(store, a, title=blank, text="delta")
    row = db.get_document(store, a)
    assert (row.title, row.text) == ("A title", "gamma")


def test_editing_a_document_bumps_its_version_and_checks_the_one_seen(store: Store) -> None:
    c = db.create_corpus(store, "C")
    (a,) = db.add_documents(store, c.id, [{"text": "alpha", "title": "A"}]).document_ids
    assert db.get_document(store, a).version == 1
    assert db.update_document(store, a, title="A", text="alpha").version == 1  # nothing changed
    assert db.update_document(store, a, title="A2", expected_version=1).version == 2
    with pytest.raises(db.VersionConflictError, match="you saw version 1, it is now version 2"):
        db.update_document(store, a, text="beta", expected_version=1)
    assert db.get_document(store, a).text == "alpha"  # the refused edit wrote nothing
    assert db.update_document(store, a, text="beta", expected_version=2).version == 3
    # a label decision based on the text shown before the edit is refused
    cat = db.add_categories(store, c.id, ["x"])[0]
    with pytest.raises(db.VersionConflictError):
        db.decide_label(store, a, cat.id, "ann", expected_version=2)


def test_deleting_a_document_flags_the_queries_it_was_ground_truth_of(store: Store, count_rows) -> None:
    c = db.create_corpus(store, "C")
    a, b, d = db.add_documents(store, c.id, [{"text": "alpha", "title": "Alpha"}, {"text": "beta"},
                                             {"text": "delta"}]).document_ids
    qs = db.create_query_set(store, c.id, "Q")
    both, other, only = db.add_queries(store, qs.id, [{"text": "alpha and beta", "ground_truth": [a, b]},
                                                      {"text": "delta", "ground_truth": [d]},
                                                      {"text": "alpha", "ground_truth": [a], "status": "flagged",
                                                       "error": "checked by hand"}])
    version = db.get_corpus(store, c.id).version
    assert db.ground_truth_queries(store, a) == [both, only]
    with pytest.raises(db.VersionConflictError):
        db.delete_document(store, a, expected_version=7)
    assert db.document_ids(store, c.id) == [a, b, d] and count_rows("query_ground_truth") == 4
    gone = db.delete_document(store, a, expected_version=1)
    assert gone == db.DocumentDeletion("Alpha", [both, only])
    assert db.document_ids(store, c.id) == [b, d] and db.get_corpus(store, c.id).version == version + 1
    rows = {q.id: q for q in db.list_queries(store, qs.id)}
    note = "ground-truth document 'Alpha' (#%d) was deleted" % a
    assert (rows[both].status, rows[both].error, rows[both].ground_truth) == ("flagged", note, [b])
    assert (rows[only].status, rows[only].error, rows[only].ground_truth) == ("flagged", f"checked by hand; {note}", [])
    assert (rows[other].status, rows[other].error) == ("ok", "")
    with pytest.raises(db.NotFoundError):
        db.delete_document(store, a)


def test_delete_documents_only_touches_the_given_corpus(store: Store) -> None:
    c = db.create_corpus(store, "C")
    other = db.create_corpus(store, "Other")
    mine = db.add_documents(store, c.id, [{"text": "a"}, {"text": "b"}]).document_ids
    theirs = db.add_documents(store, other.id, [{"text": "a"}]).document_ids
    assert db.delete_documents(store, c.id, [mine[0], theirs[0]]) == 1
    assert db.document_ids(store, c.id) == [mine[1]]
    assert db.document_ids(store, other.id) == theirs
    assert db.get_corpus(store, c.id).version == 3
    assert db.delete_documents(store, c.id, [12345]) == 0
    assert db.get_corpus(store, c.id).version == 3


def test_document_sources_of_one_corpus(tmp_path) -> None:
    store = db.open_store(f"sqlite:///{tmp_path / 'src.db'}")
    a = db.create_corpus(store, "A")
    b = db.create_corpus(store, "B")
    ids = db.add_documents(store, a.id, [{"title": "x", "text": "one", "source": "legal topic wills"},
                                         {"title": "y", "text": "two"}]).document_ids
    db.add_documents(store, b.id, [{"title": "z", "text": "three", "source": "other.csv"}])
    assert db.document_sources(store, a.id) == {ids[0]: "legal topic wills", ids[1]: ""}


def test_a_title_change_moves_updated_at_but_not_the_documents_version(store: Store) -> None:
    c = db.create_corpus(store, "C")
    (doc_id,) = db.add_documents(store, c.id, [{"title": "Old", "text": "t"}]).document_ids
    before = db.get_corpus(store, c.id)
    db.update_document(store, doc_id, title="New")
    after = db.get_corpus(store, c.id)
    assert after.version == before.version and after.updated_at > before.updated_at
    db.update_document(store, doc_id, title="New")  # no change, nothing moves
    assert db.get_corpus(store, c.id).updated_at == after.updated_at
