"""A four-document corpus (two categories) shared by the command-line tests, in a real SQLite file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

import db

MINI_DOCS = [
    {"title": "Moon", "text": "The moon orbits the earth every month.", "label": "space"},
    {"title": "Mars", "text": "Mars is a red planet with dusty storms.", "label": "space"},
    {"title": "Bread", "text": "Bread dough rises with yeast in a warm kitchen.", "label": "food"},
    {"title": "Soup", "text": "A hot tomato soup with basil and garlic.", "label": "food"},
]


def mini_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, db.Store, int, list[int]]:
    """A fresh SQLite file holding corpus "Mini" of :data:`MINI_DOCS` (embedding caches beside it):
    (url, the open store, corpus id, document ids). The caller closes the store."""
    monkeypatch.setenv("MRAG_CACHE_DIR", str(tmp_path / "cache"))
    url = f"sqlite:///{tmp_path / 't.db'}"
    store = db.open_store(url)
    corpus = db.create_corpus(store, "Mini")
    return url, store, corpus.id, db.add_documents(store, corpus.id, MINI_DOCS).document_ids


@dataclass(frozen=True)
class TextDoc:
    """A document as query generation reads it (``title``, ``text``)."""

    title: str
    text: str


#: Moon and Mars of :data:`MINI_DOCS`, keyed as query plans name documents, and a plan drawing both.
TWO_DOCS = {"1": TextDoc("Moon", MINI_DOCS[0]["text"]), "2": TextDoc("Mars", MINI_DOCS[1]["text"])}
