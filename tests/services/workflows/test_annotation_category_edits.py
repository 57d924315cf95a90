"""Renaming, merging and deleting categories (``aw.rename_category`` / ``aw.delete_category`` and
``mrag-studio corpora --corpus NAME --rename-category / --delete-category``). A corpus whose labels were
imported as 'Physics' and 'physics' was refused by pre-annotation ('differ only in case or spacing; rename one')
while nothing could rename a category: merging them now makes it annotatable. A rename onto another category's
name needs a merge, a deletion of a category that labels documents needs a confirmation (or a category to move
the labels to), and both say what they do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import db
from services.cli.main import main
from services.workflows import annotation as aw


def _embed(texts: list[str]) -> np.ndarray:
    """[physics-ness, chemistry-ness, bias] of each text."""
    return np.asarray([[t.lower().count("physic") + t.lower().count("electron"),
                        t.lower().count("chem") + t.lower().count("acid"), 0.1] for t in texts])


def _imported(store: db.Store) -> db.CorpusInfo:
    """Documents imported with the labels 'Physics', 'physics' and 'Chemistry' straight through the store (as an
    import before the import folded spellings, or a database written by another tool)."""
    corpus = db.create_corpus(store, "Sci")
    db.add_documents(store, corpus.id, [
        {"title": "Electrons", "text": "Electrons orbit.", "label": "Physics"},
        {"title": "Photons", "text": "Photons travel.", "label": "physics"},
        {"title": "Quarks", "text": "Quarks bind.", "label": "physics"},
        {"title": "Acids", "text": "Acids burn.", "label": "Chemistry"},
        {"title": "Bases", "text": "Bases neutralise acids."},
    ])
    return corpus


@pytest.mark.every_backend
def test_case_clashing_imported_labels_are_merged_and_the_corpus_can_be_preannotated(store: db.Store) -> None:
    corpus = _imported(store)
    annotator = aw.ZeroShotAnnotator(_embed, "kw")
    with pytest.raises(ValueError, match="'Physics' and 'physics' differ only in case or spacing"):
        aw.preannotate(store, corpus.id, annotator)

    with pytest.raises(aw.MergeNeeded) as info:
        aw.rename_category(store, corpus.id, "physics", "Physics")
    assert str(info.value) == (
        "The corpus has a category 'Physics' already: the two can only be merged. 2 documents are labelled 'physics' "
        "(2 by a decision); 2 decisions and 0 suggestions name it (older ones included). Merging moves them all to "
        "'Physics' and deletes 'physics'; queries whose ground truth had documents of both are flagged (their "
        "aspects then share one category).")
    assert info.value.into.name == "Physics"
    assert len(db.list_categories(store, corpus.id)) == 3  # nothing changed

    message = aw.rename_category(store, corpus.id, "physics", "Physics", merge=True)
    assert message == ("Merged 'physics' into 'Physics': 2 documents labelled 'physics' are labelled 'Physics' now "
                       "(2 decisions and 0 suggestions moved).")
    assert db.category_counts(store, corpus.id) == {"Chemistry": 1, "Physics": 3}
    summary = aw.preannotate(store, corpus.id, annotator)  # refused before the merge
    assert (summary.todo, summary.ok, summary.failed) == (5, 5, 0)
    labels = db.effective_labels(store, corpus.id)
    assert [labels[d].category for d in sorted(labels)] == ["Physics", "Physics", "Physics", "Chemistry",
                                                             "Chemistry"]  # Bases ('acids') by its suggestion


@pytest.mark.every_backend
def test_a_rename_to_a_spelling_of_another_takes_the_typed_spelling(store: db.Store) -> None:
    corpus = _imported(store)
    message = aw.rename_category(store, corpus.id, "Physics", "PHYSICS ", merge=True)
    assert message.startswith("Merged 'Physics' into 'PHYSICS': 1 document labelled 'Physics' is labelled "
                              "'PHYSICS' now")
    assert [c.name for c in db.list_categories(store, corpus.id)] == ["Chemistry", "PHYSICS"]


@pytest.mark.every_backend
def test_plain_renames_and_bad_names(store: db.Store) -> None:
    corpus = _imported(store)
    assert aw.rename_category(store, corpus.id, "Chemistry", "  Organic   chemistry ") == (
        "Renamed category 'Chemistry' to 'Organic chemistry'.")
    assert aw.rename_category(store, corpus.id, "Organic chemistry", "organic chemistry") == (
        "Renamed category 'Organic chemistry' to 'organic chemistry'.")  # its own spelling: no merge
    for old, new, message in [
        ("Biology", "Bio", "The corpus has no category 'Biology' (its categories: 'organic chemistry', 'Physics', "
                           "'physics')."),
        ("physic", "x", "The corpus has no category 'physic'"),
        ("PHYSICS", "x", "'PHYSICS' matches several categories up to case or spacing ('Physics', 'physics'); give "
                         "its exact spelling."),
        ("Physics", "   ", "Type the new name of the category."),
        ("organic chemistry", "organic  chemistry", "The category is called 'organic chemistry' already."),
    ]:
        with pytest.raises(ValueError) as info:
            aw.rename_category(store, corpus.id, old, new)
        assert str(info.value).startswith(message)
    assert [c.name for c in db.list_categories(store, corpus.id)] == ["organic chemistry", "Physics", "physics"]


@pytest.mark.every_backend
def test_deleting_a_used_category_needs_a_confirmation_or_a_category_to_move_to(store: db.Store) -> None:
    corpus = _imported(store)
    docs = db.document_ids(store, corpus.id)
    qs = db.create_query_set(store, corpus.id, "Q")
    (query,) = db.add_queries(store, qs.id, [{"text": "t", "ground_truth": [docs[1], docs[3]]}])
    db.create_eval_run(store, corpus_id=corpus.id, query_set_id=qs.id)
    with pytest.raises(aw.ConfirmationNeeded) as info:
        aw.delete_category(store, corpus.id, "physics")
    assert str(info.value) == (
        "2 documents are labelled 'physics' (2 by a decision); 2 decisions and 0 suggestions name it (older ones "
        "included). Deleting it deletes those decisions and suggestions: each such document falls back to its "
        "earlier label of another category, if any, else becomes unlabelled (move the labels to another category "
        "instead to keep them). 1 query has such a document in its ground truth: it keeps it and is flagged for "
        "review. The corpus' 1 stored evaluation run keeps the scores computed with the categories as they were; "
        "evaluate again to score the new ones.")
    assert db.category_counts(store, corpus.id) == {"Chemistry": 1, "Physics": 1, "physics": 2}

    message = aw.delete_category(store, corpus.id, "physics", confirm=True)
    assert message == (
        "Deleted category 'physics' with its 2 decisions and 0 suggestions: 2 documents are unlabelled now, 0 fell "
        f"back to an earlier label. Flagged 1 query whose ground truth's categories changed (id {query}): review it "
        "in the Query Builder. The corpus' 1 stored evaluation run keeps the scores computed with the categories "
        "as they were; evaluate again to score the new ones.")
    assert db.category_counts(store, corpus.id) == {"Chemistry": 1, "Physics": 1}
    assert db.get_query(store, query).ground_truth == [docs[1], docs[3]]

    assert aw.delete_category(store, corpus.id, "Physics", move_to="Chemistry").startswith(
        "Merged 'Physics' into 'Chemistry': 1 document labelled 'Physics' is labelled 'Chemistry' now")
    with pytest.raises(ValueError, match="Choose another category than 'Chemistry'"):
        aw.delete_category(store, corpus.id, "Chemistry", move_to="Chemistry")
    db.add_categories(store, corpus.id, ["unused"])
    assert aw.delete_category(store, corpus.id, "unused").startswith("Deleted category 'unused' with its 0 decisions")


def test_the_cli_lists_renames_merges_and_deletes_categories(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    store = db.open_store(url)
    try:
        corpus = _imported(store)
    finally:
        store.close()

    def run(*argv: str) -> tuple[int, str, str]:
        status = main(["corpora", "--database", url, *argv])
        out = capsys.readouterr()
        return status, out.out, out.err

    status, out, _ = run("--corpus", "Sci", "--categories")
    assert status == 0 and [line.split()[:2] for line in out.splitlines()[1:]] == [
        ["Chemistry", "1"], ["Physics", "1"], ["physics", "2"]]
    status, _, err = run("--corpus", "Sci", "--rename-category", "physics", "Physics")
    assert status == 2 and err.startswith("error: The corpus has a category 'Physics' already: the two can only "
                                          "be merged.")
    assert err.rstrip().endswith("Add --merge to merge them; nothing was changed.")
    status, _, err = run("--corpus", "Sci", "--delete-category", "Chemistry")
    assert status == 2 and err.startswith("error: 1 document is labelled 'Chemistry' (1 by a decision)")
    assert err.rstrip().endswith("Add --yes to delete it, or --move-to CATEGORY to keep its labels; nothing was "
                                 "changed.")
    status, _, err = run("--corpus", "Sci", "--delete-category", "Chemistry", "--move-to", "Biology")
    assert status == 2 and "no category 'Biology'" in err
    status, _, err = run("--corpus", "Sci", "--rename-category", "a", "b", "--move-to", "Physics")
    assert (status, err) == (2, "error: --move-to goes with --delete-category\n")
    status, _, err = run("--rename-category", "physics", "Physics")
    assert (status, err) == (2, "error: --categories, --rename-category and --delete-category need --corpus NAME\n")

    status, out, _ = run("--corpus", "Sci", "--rename-category", "physics", "Physics", "--merge")
    assert (status, out) == (0, "Merged 'physics' into 'Physics': 2 documents labelled 'physics' are labelled "
                                "'Physics' now (2 decisions and 0 suggestions moved).\n")
    status, out, _ = run("--corpus", "Sci", "--delete-category", "Chemistry", "--yes")
    assert status == 0 and out.startswith("Deleted category 'Chemistry' with its 1 decision and 0 suggestions: "
                                          "1 document is unlabelled now")
    store = db.open_store(url)
    try:
        assert db.category_counts(store, corpus.id) == {"Physics": 3}
    finally:
        store.close()
