"""Cut a query into parts without an LLM: sentences, windows of sentences, paragraphs.

A multi-aspect query (a story) tends to put its aspects in different sentences, and an encoder reads
at most ``max_length`` tokens (MiniLM: 256), so a long query's later aspects are never seen when it is
embedded whole. Its parts are embedded one by one (in one batch) instead.

Sentences (:func:`split_sentences`), deterministic, no model:

1. Blocks: the text is cut at line breaks; whitespace inside a block is collapsed to single spaces.
2. A sentence ends after ``.``, ``!``, ``?`` or ``…`` (closing quotes or brackets kept with it) followed by
   whitespace and then an opening quote or bracket or a character that is not a lower-case letter, unless
   the word ending in ``.`` is an abbreviation: one in :data:`ABBREVIATIONS` (``Dr.``, ``e.g.``, ``St.``,
   ``Jan.``, ...), a single letter (an initial, ``J. R. R. Tolkien``) or letters joined by dots (``U.S.``).
3. A sentence also ends after the full stops of Chinese and Japanese (``。``, ``！``, ``？``, ``．``, closing
   brackets kept), which no space follows.
4. Length is counted in units: a CJK character is one unit (an encoder reads it as one token), and so is
   each run of at most :data:`WORD_CHARS` other non-space characters (a word; a URL counts one unit per
   ``WORD_CHARS`` characters). A sentence longer than :data:`MAX_WORDS` units is cut into pieces of at most
   that many, as even as possible (CJK text without full stops, one endless sentence). So no part is
   truncated by the encoder.
5. A sentence of fewer than :data:`MIN_WORDS` units (a heading, ``Yes.``) is joined to the sentence before
   it in its block (the one after it when it comes first); a block that is only such a fragment stays.
   Joins use a space, none between CJK text.
6. Empty parts are dropped, and so is a part equal to an earlier one (compared case-folded, spaces collapsed).

``windows(sentences, w)``: every run of ``w`` consecutive sentences (stride 1); ``paragraphs(text)``: the
blocks of step 1 with blank-line breaks only, each cut by step 4 at :data:`PARAGRAPH_WORDS` words.
"""

from __future__ import annotations

import re

__all__ = [
    "ABBREVIATIONS",
    "WORD_CHARS",
    "MAX_WORDS",
    "MIN_WORDS",
    "paragraphs",
    "split_sentences",
    "windows",
]

MAX_WORDS = 64
"""Longest part in words (MiniLM reads 256 tokens; 64 English words are about 85)."""
WORD_CHARS = 24
"""A run of non-space characters longer than this (a URL, a code) counts as one word per WORD_CHARS characters."""
PARAGRAPH_WORDS = 180
"""Longest paragraph part in words (about 240 MiniLM tokens)."""
MIN_WORDS = 3
"""Shorter sentences are joined to a neighbour."""

ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr prof sr jr st mt ft gen col lt sgt capt cmdr adm maj rev fr hon gov sen rep pres supt insp
    messrs mme mlle sra srta dept univ assn bros inc ltd co corp plc llc vs etc al approx est ca cf ibid viz
    no nos vol vols fig figs pp op ed eds esp ch sec art nr tel jan feb mar apr jun jul aug sep sept oct nov
    dec mon tue wed thu fri sat sun e.g i.e a.m p.m a.d b.c
    """.split()
)
"""Words (lower case, without the final dot) after which a ``.`` does not end a sentence."""

_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]}\u00bb]*\s+(?=[\"'\u201c\u2018(\[{\u00ab]*[^\s])")
_CJK_END = re.compile(r"[\u3002\uff01\uff1f\uff0e][\u300d\u300f\uff09\u3015\u3011\u3009\u300b\"'\u201d\u2019]*")
_CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK = re.compile(f"[{_CJK_RANGES}]")
_UNIT = re.compile(f"[{_CJK_RANGES}]|[^\\s{_CJK_RANGES}]{{1,{WORD_CHARS}}}")
_LAST_WORD = re.compile(r"(\S+)\.[\"'\u201d\u2019)\]}\u00bb]*$")
_DOTTED = re.compile(r"^(?:[^\W\d_]\.)+[^\W\d_]$|^[^\W\d_]$")


def _is_abbreviation(head: str) -> bool:
    """Whether the text ``head``, which ends in ``.`` (plus closing marks), ends in an abbreviation."""
    m = _LAST_WORD.search(head)
    if m is None:
        return False
    word = m.group(1).lstrip("\"'(\u201c\u2018[{\u00ab")
    return word.lower() in ABBREVIATIONS or bool(_DOTTED.match(word))


def _starts_lower(text: str) -> bool:
    stripped = text.lstrip("\"'\u201c\u2018([{\u00ab")
    return bool(stripped) and stripped[0].islower()


def _sentence_cuts(block: str) -> list[str]:
    """One block (no line breaks, single spaces) cut at sentence ends (steps 2 and 3)."""
    pieces: list[str] = []
    start = 0
    for m in _END.finditer(block):
        head = block[start:m.end()].rstrip()
        if _starts_lower(block[m.end():]) or (block[m.start()] == "." and _is_abbreviation(head)):
            continue
        pieces.append(head)
        start = m.end()
    pieces.append(block[start:])
    out: list[str] = []
    for piece in pieces:
        pos = 0
        for m in _CJK_END.finditer(piece):
            out.append(piece[pos:m.end()])
            pos = m.end()
        out.append(piece[pos:])
    return [p.strip() for p in out if p.strip()]


def _units(text: str) -> list[tuple[bool, str]]:
    """Step 4's units of ``text``: each CJK character, and each run of at most WORD_CHARS other non-space
    characters; with whether a space came before it."""
    return [(m.start() > 0 and text[m.start() - 1].isspace(), m.group()) for m in _UNIT.finditer(text)]


def _join_units(units: list[tuple[bool, str]]) -> str:
    return "".join((" " if space and i else "") + unit for i, (space, unit) in enumerate(units))


def _word_count(text: str) -> int:
    """Length in step 4's units (words; a CJK character is one)."""
    return len(_units(text))


def _cut_long(sentence: str, max_words: int = MAX_WORDS) -> list[str]:
    """Step 4: pieces of at most ``max_words`` units, as even as possible."""
    units = _units(sentence)
    if len(units) <= max_words:
        return [_join_units(units)] if units else []
    n_pieces = -(-len(units) // max_words)
    size, extra = divmod(len(units), n_pieces)
    out, pos = [], 0
    for i in range(n_pieces):
        step = size + (1 if i < extra else 0)
        out.append(_join_units(units[pos:pos + step]))
        pos += step
    return out


def _glue(a: str, b: str) -> str:
    """``a`` and ``b`` joined by a space, or without one between CJK text."""
    return a + b if _CJK.match(b[:1]) or _CJK_END.match(a[-1:]) or _CJK.match(a[-1:]) else f"{a} {b}"


def _join_short(sentences: list[str]) -> list[str]:
    """Step 5: a sentence under MIN_WORDS words joins the one before it (or after it, when first)."""
    out: list[str] = []
    pending = ""
    for s in sentences:
        if pending:
            s = _glue(pending, s)
            pending = ""
        if _word_count(s) < MIN_WORDS:
            if out:
                out[-1] = _glue(out[-1], s)
            else:
                pending = s
            continue
        out.append(s)
    if pending:
        out.append(pending)
    return out


def _unique(parts: list[str]) -> list[str]:
    """Step 6: drop empty parts and repeats (case-folded, spaces collapsed), keeping the first."""
    seen: set[str] = set()
    out = []
    for p in parts:
        key = " ".join(p.casefold().split())
        if key and key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _blocks(text: str, pattern: str) -> list[str]:
    return [" ".join(b.split()) for b in re.split(pattern, text or "") if b.strip()]


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see the module docstring); ``[]`` for a blank text."""
    parts: list[str] = []
    for block in _blocks(text, r"\n"):
        cut = [piece for s in _sentence_cuts(block) for piece in _cut_long(s)]
        parts.extend(_join_short(cut))
    return _unique(parts)


def paragraphs(text: str) -> list[str]:
    """Blocks separated by blank lines (whitespace collapsed), each cut into pieces of at most PARAGRAPH_WORDS
    words."""
    return _unique([piece for block in _blocks(text, r"\n\s*\n") for piece in _cut_long(block, PARAGRAPH_WORDS)])


def windows(sentences: list[str], w: int) -> list[str]:
    """Every run of ``w`` consecutive sentences joined by a space (stride 1); all of them when fewer than ``w``."""
    if w < 1:
        raise ValueError(f"a window holds at least one sentence, got {w}")
    if len(sentences) <= w:
        return [" ".join(sentences)] if sentences else []
    return [" ".join(sentences[i:i + w]) for i in range(len(sentences) - w + 1)]
