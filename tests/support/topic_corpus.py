"""A corpus of short documents in four categories whose titles give their category away without naming it
("Market letter 7" is Finance), for the pre-annotation tests that a :class:`tests.support.small_model.SmallModel`
answers (its ``truth`` is :func:`truth`). A wrong answer that repeats the title names no category."""

from __future__ import annotations

import db
from services.annotate import AnnotationDoc, CategorySpec

__all__ = ["CATEGORIES", "KINDS", "TOPIC_TEXTS", "add_topic_corpus", "topic_docs", "truth"]

CATEGORIES = [CategorySpec("Sports", "games, athletes, matches"), CategorySpec("Public Health", "disease, vaccines"),
              CategorySpec("Finance", "markets, banks, money"), CategorySpec("Space", "planets, rockets, stars")]
KINDS = {"Sports": "Match report", "Public Health": "Clinic bulletin", "Finance": "Market letter",
         "Space": "Launch log"}
TOPIC_TEXTS = {"Sports": "The team won the match after extra time.",
               "Public Health": "The vaccine campaign reached every clinic in the region.",
               "Finance": "The central bank raised its interest rate again.",
               "Space": "The rocket carried a probe towards the outer planets."}


def _title(index: int) -> str:
    return f"{KINDS[CATEGORIES[index % len(CATEGORIES)].name]} {index}"


def truth(title: str) -> str:
    """The category of a document of this corpus, read from its title."""
    return next(name for name, kind in KINDS.items() if title.startswith(f"{kind} "))


def topic_docs(n: int) -> list[AnnotationDoc]:
    """``n`` documents (keys 0..n-1), the categories in turn, each text its own (the store keeps one of equal
    texts)."""
    return [AnnotationDoc(i, _title(i), f"{TOPIC_TEXTS[truth(_title(i))]} (item {i})") for i in range(n)]


def add_topic_corpus(store: db.Store, name: str, n: int) -> tuple[int, list[int]]:
    """Corpus ``name`` of :func:`topic_docs` (no labels) with the four categories: (its id, the document ids)."""
    corpus = db.create_corpus(store, name)
    db.add_categories(store, corpus.id, [{"name": c.name, "description": c.description} for c in CATEGORIES])
    ids = db.add_documents(store, corpus.id, [{"title": d.title, "text": d.text} for d in topic_docs(n)]).document_ids
    return corpus.id, list(ids)
