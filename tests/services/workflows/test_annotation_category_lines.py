"""services.workflows.annotation.parse_category_lines / add_categories: categories typed one per line on the
Annotate and Review page (``name`` or ``name: description``), checked whole before anything is stored."""

from __future__ import annotations

from pathlib import Path

import pytest

import db
from services.workflows.annotation import add_categories, parse_category_lines


def test_lines_become_names_and_descriptions_split_at_the_first_colon() -> None:
    text = "  sport :  football, matches \n\n\tcooking\nlaw: contracts: sale, lease\n   \n"
    assert parse_category_lines(text) == [
        {"name": "sport", "description": "football, matches"},
        {"name": "cooking", "description": ""},
        {"name": "law", "description": "contracts: sale, lease"},
    ]
    assert parse_category_lines("New   York  Times: papers") == [{"name": "New York Times", "description": "papers"}]


@pytest.mark.parametrize(("text", "existing", "message"), [
    ("", (), "Type at least one category name."),
    (" \n\n", (), "Type at least one category name."),
    ("sport\n: no name", (), "Line 2 has no category name before its colon."),
    ("x" * 201, (), "Line 1: the category name is longer than 200 characters."),
    ("a\n\nsport\nSPORT", (), "Line 4: 'SPORT' is given twice (or differs from 'sport' only in case or spacing)."),
    ("sport", ("sport",), "Line 1: the corpus has a category 'sport' already."),
    ("big  cats", ("Big cats",), "Line 1: the corpus has a category 'Big cats' already, which differs from "
                                 "'big cats' only in case or spacing."),
])
def test_wrong_lines_are_refused_naming_the_line(text: str, existing: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_category_lines(text, existing)
    assert str(info.value) == message


def test_add_categories_stores_all_or_nothing(tmp_path: Path) -> None:
    store = db.open_store(f"sqlite:///{tmp_path / 't.db'}")
    try:
        corpus = db.create_corpus(store, "C")
        version = db.get_corpus(store, corpus.id).labels_version
        added = add_categories(store, corpus.id, "sport: goals\ncooking")
        assert [(c.name, c.description) for c in added] == [("sport", "goals"), ("cooking", "")]
        assert db.get_corpus(store, corpus.id).labels_version == version + 1
        with pytest.raises(ValueError, match="Line 2: the corpus has a category 'sport' already"):
            add_categories(store, corpus.id, "law\nSport")
        assert sorted(c.name for c in db.list_categories(store, corpus.id)) == ["cooking", "sport"]  # no 'law'
    finally:
        store.close()
