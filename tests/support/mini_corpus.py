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


#: Four one-sentence documents in two categories (sky: d0, d1; food: d2, d3), for the evaluation-run tests.
SKY_AND_FOOD = [
    {"title": f"d{i}", "text": text, "label": label}
    for i, (text, label) in enumerate([("A comet passed near the sun.", "sky"), ("The telescope saw a galaxy.", "sky"),
                                       ("Knead the bread dough.", "food"), ("Simmer the tomato sauce.", "food")])
]


def add_sky_and_food(store: db.Store) -> tuple[db.CorpusInfo, list[int]]:
    """Corpus "T" of :data:`SKY_AND_FOOD` in ``store``: (the corpus, its document ids d0..d3)."""
    corpus = db.create_corpus(store, "T")
    return corpus, db.add_documents(store, corpus.id, SKY_AND_FOOD).document_ids


#: Six (title, category, text) documents, two in each of space, music and food, for the query-set tests.
SPACE_MUSIC_FOOD = [
    ("Mercury", "space", "Mercury is the smallest planet. Its orbit around the Sun takes only 88 days."),
    ("Venus", "space", "Venus is the hottest planet. Its thick atmosphere of carbon dioxide traps heat."),
    ("Jazz", "music", "Jazz began in New Orleans. Louis Armstrong made the trumpet famous worldwide."),
    ("Opera", "music", "Opera joins singing and theatre. Verdi wrote many famous Italian operas."),
    ("Bread", "food", "Bread is made of flour, water and yeast. The dough rises before baking."),
    ("Cheese", "food", "Cheese is made from milk. Aged cheese develops a strong flavour over months."),
]


def add_space_music_food(store: db.Store, name: str = "Six") -> db.CorpusInfo:
    """Corpus ``name`` of :data:`SPACE_MUSIC_FOOD` (labelled) in ``store``."""
    corpus = db.create_corpus(store, name)
    db.add_documents(store, corpus.id, [{"title": t, "label": lab, "text": x} for t, lab, x in SPACE_MUSIC_FOOD])
    return db.get_corpus(store, corpus.id)
