"""The shipped demo corpus (services/demo): its shape, and queries a demo can show honestly: each aspect a document
of its own category, named in the query's text, and the whole query inside the 256 tokens the shipped MiniLM reads
(a longer query loses its last aspects before Standard RAG, MRAG or Split RAG see them, and only Fusion, which embeds
each sub-query on its own, would find those)."""

from __future__ import annotations

from collections import Counter

import pytest

from services.demo import load_demo


@pytest.fixture(scope="module")
def demo():
    return load_demo()


def test_twelve_categories_of_eight_documents_and_24_queries(demo) -> None:
    names = [c["name"] for c in demo.categories]
    assert len(names) == len(set(names)) == 12
    assert Counter(d["label"] for d in demo.documents) == {n: 8 for n in names}
    titles = [d["title"] for d in demo.documents]
    assert len(titles) == len(set(titles)) == 96
    assert len(demo.queries) == 24


def test_each_aspect_is_a_document_of_its_own_category_named_in_the_text(demo) -> None:
    label = {d["title"]: d["label"] for d in demo.documents}
    assert Counter(len(q["topics"]) for q in demo.queries) == {n: 4 for n in range(1, 7)}
    for q in demo.queries:
        cats = [label[t] for t in q["topics"]]
        assert len(set(cats)) == len(cats), q["topics"]
        assert [t for t in q["topics"] if t not in q["text"]] == [], q["text"]
        assert q["fusion"] and all(s.strip() for s in q["fusion"])


def test_every_query_fits_the_window_of_the_shipped_model(demo) -> None:
    from mrag_core.models.loader import load_model
    from services.workflows.indexing import query_window

    lm = load_model("minilm", device="cpu")
    windows = {q["text"][:40]: query_window(lm, q["text"]) for q in demo.queries}
    assert {w.limit for w in windows.values()} == {256}
    assert {k: w.n_tokens for k, w in windows.items() if w.n_tokens > w.limit} == {}
