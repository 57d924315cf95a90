"""Markers: named facts about the database, set, replaced, read back and cleared in a real database."""

from __future__ import annotations

import pytest

import db
from db.engine import Store


def test_set_replace_read_and_clear(store: Store) -> None:
    assert db.get_marker(store, "demo_corpus") is None
    db.set_marker(store, "demo_corpus", "3@2026-01-01")
    db.set_marker(store, "other", "")
    assert db.get_marker(store, "demo_corpus") == "3@2026-01-01"
    db.set_marker(store, "demo_corpus", "4@2026-02-02")
    assert db.get_marker(store, "demo_corpus") == "4@2026-02-02"
    with db.open_store(store.engine.url.render_as_string(hide_password=False)) as again:  # stored, not cached
        assert (db.get_marker(again, "demo_corpus"), db.get_marker(again, "other")) == ("4@2026-02-02", "")
    assert db.clear_marker(store, "demo_corpus") is True
    assert db.clear_marker(store, "demo_corpus") is False
    assert db.get_marker(store, "demo_corpus") is None and db.get_marker(store, "other") == ""


@pytest.mark.parametrize("name", ["", "x" * 101])
def test_bad_names_are_refused(store: Store, name: str) -> None:
    with pytest.raises(db.InvalidInputError):
        db.set_marker(store, name, "v")
