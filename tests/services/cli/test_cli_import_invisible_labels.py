"""Labels that differ only by invisible characters (``phys\\u200bics``: a zero-width space) or compatibility forms
(full-width ``ｐｈｙｓｉｃｓ``) are imported as the category they look like, with a warning naming the row: they became
a second category that looked the same as the first (and pre-annotation refused the corpus)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import db
from services.annotate.types import CategorySpec, validate_categories
from services.cli.main import main
from services.workflows import annotation as aw

HIDDEN = "phys\u200bics"  # a zero-width space inside
WIDE = "ｐｈｙｓｉｃｓ"


def _docs(file: str, *labels: str) -> str:
    return json.dumps([{"title": f"D{i}", "text": f"Document {i} of {file} about particles.", "label": label}
                       for i, label in enumerate(labels, start=1)])


def _categories(url: str) -> list[str]:
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, "Sci")
        categories = db.list_categories(store, corpus.id)
        validate_categories([CategorySpec(c.name) for c in categories])  # pre-annotation accepts them
        return sorted(c.name for c in categories)
    finally:
        store.close()


def test_labels_differing_only_by_invisible_characters_are_one_category(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    first = tmp_path / "a.json"
    first.write_text(_docs("a", "physics", HIDDEN, WIDE, "chemistry"))
    assert main(["import", "--corpus", "Sci", str(first), "--database", url]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("read 4 rows: 4 documents to import in 2 categories; 0 errors (left out), "
                                   "2 warnings")
    assert ("  WARNING a.json row 2: label 'phys\\u200bics' is imported as 'physics': they differ only in case or "
            "spacing, which the annotators cannot tell apart") in out.splitlines()
    assert f"  WARNING a.json row 3: label '{WIDE}' is imported as 'physics'" in out
    second = tmp_path / "b.json"
    second.write_text(_docs("b", "\u200bphysics\u200b", "Chemistry\u00ad"))
    assert main(["import", "--corpus", "Sci", "--add", str(second), "--database", url]) == 0
    assert _categories(url) == ["chemistry", "physics"]
    store = db.open_store(url)
    try:
        corpus = db.get_corpus_by_name(store, "Sci")
        labels = db.effective_labels(store, corpus.id)
        assert sorted(lab.category for lab in labels.values()) == ["chemistry", "chemistry"] + ["physics"] * 4
        # typing a category that looks like one the corpus has is refused as a clash, not added beside it
        with pytest.raises(ValueError) as exc:
            aw.parse_category_lines(HIDDEN, ["physics", "chemistry"])
        assert str(exc.value) == ("Line 1: the corpus has a category 'physics' already, which differs from "
                                  "'phys\\u200bics' only in case or spacing.")
        assert aw.find_category(store, corpus.id, WIDE).name == "physics"
    finally:
        store.close()
