"""Labels that differ only in case or spacing ('Physics', 'physics', 'PHYSICS ') are imported as one category,
spelled as the first (a category the target corpus has already comes first), with a warning per other spelling.
They became separate categories, and pre-annotation then refused the corpus ('Categories 'Physics' and 'physics'
differ only in case or spacing; rename one') with no page or command to rename a category."""

from __future__ import annotations

from pathlib import Path

import db
from services.annotate.types import CategorySpec, validate_categories
from services.cli.main import main
from services.ingest import ImportPreview, ImportRecord
from services.workflows import corpus as cw


def _read(*labels: str | None) -> ImportPreview:
    records = [ImportRecord(title=f"D{i}", text=f"text number {i}", label=label, source=f"f.csv row {i + 1}")
               for i, label in enumerate(labels)]
    return ImportPreview(records=records, n_rows_read=len(records))


def test_labels_equal_up_to_case_or_spacing_take_the_first_spelling() -> None:
    preview = cw.prepare_import(_read("Physics", "physics", None, "PHYSICS ", "physics", "Big  cats", "big cats"))
    assert [r.label for r in preview.records] == ["Physics", "Physics", None, "Physics", "Physics", "Big cats",
                                                  "Big cats"]
    assert [(i.severity, i.location, i.message) for i in preview.issues] == [
        ("warning", "f.csv row 2", "label 'physics' is imported as 'Physics': they differ only in case or spacing, "
                                   "which the annotators cannot tell apart"),
        ("warning", "f.csv row 4", "label 'PHYSICS' is imported as 'Physics': they differ only in case or spacing, "
                                   "which the annotators cannot tell apart"),
        ("warning", "f.csv row 7", "label 'big cats' is imported as 'Big cats': they differ only in case or "
                                   "spacing, which the annotators cannot tell apart"),
    ]  # 'physics' once though it comes twice; 'Big  cats' is 'Big cats' (only its spacing collapsed: no warning)
    assert preview.label_counts() == {"Physics": 4, None: 1, "Big cats": 2}
    assert (len(preview.records), preview.n_skipped, len(preview.errors)) == (7, 0, 0)


def test_a_category_of_the_target_corpus_comes_first() -> None:
    preview = cw.prepare_import(_read("physics", "Chemistry"), existing_labels=["Physics"])
    assert [r.label for r in preview.records] == ["Physics", "Chemistry"]
    assert [i.message for i in preview.warnings] == [
        "label 'physics' is imported as 'Physics': they differ only in case or spacing, which the annotators cannot "
        "tell apart"]


def test_the_cli_imports_one_category_and_the_corpus_can_be_annotated(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    first = tmp_path / "a.csv"
    first.write_text("title,text,label\nA,alpha text,Physics\nB,beta text,physics\n")
    second = tmp_path / "b.csv"
    second.write_text("title,text,label\nC,gamma text,PHYSICS\nD,delta text,chemistry\n")
    assert main(["import", "--corpus", "Sci", str(first), "--database", url]) == 0
    assert main(["import", "--corpus", "Sci", "--add", str(second), "--database", url]) == 0
    out = capsys.readouterr().out
    assert "WARNING b.csv row 1: label 'PHYSICS' is imported as 'Physics'" in out
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, "Sci")
        categories = db.list_categories(store, corpus.id)
        assert sorted(c.name for c in categories) == ["Physics", "chemistry"]
        validate_categories([CategorySpec(c.name, c.description) for c in categories])  # raised before
        labels = db.effective_labels(store, corpus.id)
        assert sorted(lab.category for lab in labels.values()) == ["Physics", "Physics", "Physics", "chemistry"]
    finally:
        store.close()
