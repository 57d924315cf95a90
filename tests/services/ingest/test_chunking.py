"""Tests for services.ingest.chunking."""

from __future__ import annotations

import random

import pytest

from services.ingest.chunking import apply_chunking, chunk_by_chars, chunk_by_paragraphs
from services.ingest.records import ImportRecord


def words_text(n_words: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return " ".join("".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 12))) for _ in range(n_words))


@pytest.mark.parametrize("size", [20, 57, 200])
def test_chunk_by_chars_no_overlap_keeps_every_word(size: int) -> None:
    text = words_text(300)
    chunks = chunk_by_chars(text, size)
    assert all(0 < len(c) <= size for c in chunks)
    assert " ".join(chunks).split() == text.split()  # cut only at whitespace
    assert len(chunks) >= len(text) // size


def test_chunk_by_chars_overlap() -> None:
    text = words_text(200, seed=1)
    chunks = chunk_by_chars(text, 100, overlap=30)
    assert all(len(c) <= 100 for c in chunks)
    for a, b in zip(chunks, chunks[1:]):
        first_word = b.split()[0]
        assert first_word in a.split()[-8:]  # next chunk starts inside the previous one
    assert text.split()[-1] == chunks[-1].split()[-1]
    joined = set(" ".join(chunks).split())
    assert joined == set(text.split())


def test_chunk_by_chars_hard_cut_and_edges() -> None:
    assert chunk_by_chars("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    assert chunk_by_chars("   ", 10) == []
    assert chunk_by_chars("short", 10) == ["short"]
    with pytest.raises(ValueError, match="positive"):
        chunk_by_chars("a", 0)
    with pytest.raises(ValueError, match="overlap"):
        chunk_by_chars("a", 10, overlap=10)


def test_chunk_by_paragraphs_merges_until_min() -> None:
    paras = [f"Paragraph {i} " + "word " * 30 for i in range(10)]  # ~160 chars each
    text = "\n\n".join(paras)
    chunks = chunk_by_paragraphs(text, min_chars=400, max_chars=2000)
    assert all(len(c) >= 400 for c in chunks)
    assert "\n\n".join(chunks).split() == text.split()
    assert all(c.startswith("Paragraph") for c in chunks)  # never cut inside a paragraph


def test_chunk_by_paragraphs_long_paragraph_and_tail() -> None:
    long_para = words_text(600, seed=2)  # ~3900 chars
    text = "Intro paragraph.\n\n" + long_para + "\n\n\n   \nTail."
    chunks = chunk_by_paragraphs(text, min_chars=800, max_chars=1000)
    assert all(len(c) <= 1000 for c in chunks)
    assert " ".join(chunks).split() == text.split()
    assert chunks[-1].endswith("Tail.")
    with pytest.raises(ValueError):
        chunk_by_paragraphs("x", min_chars=10, max_chars=5)


def test_chunk_by_paragraphs_short_text_single_chunk() -> None:
    assert chunk_by_paragraphs("One.\n\nTwo.") == ["One.\n\nTwo."]
    assert chunk_by_paragraphs("\n\n") == []


def test_apply_chunking_titles_and_parent_info() -> None:
    big = ImportRecord("Big", "\n\n".join(f"P{i} " + "w " * 200 for i in range(4)), "lab", "f.txt")
    small = ImportRecord("Small", "tiny", None, "g.txt")
    out = apply_chunking([big, small], method="paragraphs", min_chars=800, max_chars=1000)
    parts = [r for r in out if r.parent_title == "Big"]
    n = len(parts)
    assert n == 2  # 4 paragraphs of ~400 chars merge pairwise to reach 800
    assert [r.title for r in parts] == [f"Big (part {i}/{n})" for i in range(1, n + 1)]
    assert [r.chunk_index for r in parts] == list(range(n))
    assert all(r.chunk_count == n and r.label == "lab" and r.source == "f.txt" for r in parts)
    assert out[-1] is small and small.parent_title is None and small.chunk_index is None
    chars = apply_chunking([big], method="chars", size=500, overlap=0)
    assert all(len(r.text) <= 500 for r in chars) and len(chars) == 4
    with pytest.raises(ValueError, match="unknown chunking method"):
        apply_chunking([big], method="tokens")  # type: ignore[arg-type]
