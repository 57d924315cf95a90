"""Checks and cleaners for LLM output: title coverage of stories, line-list parsing.

Line lists (:func:`clean_subqueries`) are parsed strictly, the same way for every list the app asks for
(fusion sub-queries, Multi-Query rewrites, the intent statements' line fallback): when the answer has
numbered or bulleted items, only those items count, so a chatty model's preamble, sign-off and remarks
between items are not taken for queries; otherwise each line counts. Either way, lines ending in ``:``
(``Here are three queries:``), Markdown headings and polite chatter (``Sure!``, ``Here are ...``,
``Let me know if ...``, ``I hope this helps``) are dropped, and quotes and ``**bold**`` removed.

Normalisation used for title matching (:func:`normalize`): Unicode NFKD with
combining marks removed (``é`` -> ``e``), lower case, every run of
non-alphanumeric characters (punctuation, ``_``, whitespace) replaced by one
space, stripped. A title counts as *mentioned* when its normalised form, or the
normalised form without a trailing parenthetical (``"Mercury (planet)"`` ->
``"Mercury"``), occurs in the normalised story on word boundaries. Scripts written
without spaces between words (Chinese, Japanese, Thai, Lao, Khmer, Myanmar; Korean,
whose particles attach to the noun: ``서울은``) have no word boundaries to find: an
edge of an occurrence that touches a character of those scripts, on either side,
counts as a boundary (``東京`` is mentioned in ``東京と大阪``, ``iPhone`` in
``東京でiPhoneを``), while ``Mars`` in ``Marseille`` is still not a mention.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["dedupe", "clean_subqueries", "missing_titles", "normalize", "repeated_sentence", "title_variants"]

_NON_ALNUM = re.compile(r"[\W_]+", re.UNICODE)
_TRAILING_PAREN = re.compile(r"\s*\([^()]*\)\s*$")
# List markers: "1." "1)" "(1)" "1:" "-" "*" "•" "Query 1:" / "Q1." / "Answer 2:" — each followed by whitespace.
_LIST_MARKER = re.compile(
    r"^\s*(?:(?:[-*•+]|\(?\d{1,3}[.):]|(?:query|q|sub-?query|answer|statement|intent|fact)\s*\d{1,3}\s*[.):-])\s+)+",
    re.IGNORECASE,
)
_HEADING = re.compile(r"^#{1,6}\s")
_INLINE_MARKUP = re.compile(r"\*\*|`")
# Polite chatter around a list: an interjection followed by punctuation ("Sure!", "Certainly,"), the
# announcement ("Here are ..."), the sign-off ("Let me know ...", "I hope this helps"), remarks about the list.
_CHATTER = re.compile(
    r"^(?:(?:sure|certainly|of\s+course|absolutely|okay|ok|alright|great|no\s+problem)\s*[!.,:;]"
    r"|here(?:['’]s|\s+is|\s+are)\b"
    r"|(?:i\s+)?hope\s+(?:this|these|that|it)\b"
    r"|let\s+me\s+know\b|feel\s+free\b|would\s+you\s+like\b|(?:happy|glad)\s+to\s+help\b"
    r"|if\s+you\s+(?:need|want|would\s+like|['’]d\s+like)\b"
    r"|(?:these|those|the\s+above)\s+(?:search\s+)?(?:queries|rewrites|sub-?queries|statements|answers)\b"
    r"|note\s*:)",
    re.IGNORECASE,
)
_QUOTES = "\"'`“”‘’«»"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# Scripts written without spaces between words, after NFKD (Hangul syllables become conjoining jamo): Thai, Lao,
# Myanmar, Hangul jamo, Khmer, kana, CJK ideographs (with extension A and compatibility ideographs), Hangul
# compatibility jamo and syllables.
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)
MIN_REPEATS = 3
MIN_REPEATED_WORDS = 4


def normalize(text: str) -> str:
    """Accent-free, lower-case text with non-alphanumeric runs collapsed to single spaces."""
    decomposed = unicodedata.normalize("NFKD", text)
    no_marks = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _NON_ALNUM.sub(" ", no_marks.lower()).strip()


def title_variants(title: str) -> list[str]:
    """Normalised forms of ``title`` that count as a mention (full, and without a trailing ``(...)``)."""
    variants = [normalize(title)]
    stripped = _TRAILING_PAREN.sub("", title)
    if stripped != title:
        variants.append(normalize(stripped))
    return [v for i, v in enumerate(variants) if v and v not in variants[:i]]


def missing_titles(story: str, titles: list[str]) -> list[str]:
    """Titles (original spelling, input order) that ``story`` does not mention.

    A title whose normalised form is empty (only punctuation) cannot be checked
    and is never reported missing.
    """
    haystack = normalize(story)
    missing: list[str] = []
    for title in titles:
        variants = title_variants(title)
        if variants and not any(_mentioned(v, haystack) for v in variants):
            missing.append(title)
    return missing


def _edge(inside: str, outside: str) -> bool:
    """Whether an occurrence may end between its character ``inside`` and the story's ``outside`` ("" at the
    story's start or end): a space, the story's end, or a character of a script without spaces on either side."""
    return outside in ("", " ") or bool(_UNSPACED.match(inside) or _UNSPACED.match(outside))


def _mentioned(variant: str, haystack: str) -> bool:
    """Whether normalised ``variant`` occurs in normalised ``haystack`` with a word boundary (:func:`_edge`) at
    both ends of one of its occurrences."""
    start = haystack.find(variant)
    while start >= 0:
        end = start + len(variant)
        if (_edge(variant[0], haystack[start - 1] if start else "")
                and _edge(variant[-1], haystack[end] if end < len(haystack) else "")):
            return True
        start = haystack.find(variant, start + 1)
    return False


def _strip_quotes(line: str) -> str:
    """Remove surrounding quotes/backticks and markdown bold/italics markers."""
    previous = None
    while previous != line:
        previous = line
        line = line.strip()
        for wrap in ("**", "__"):
            if line.startswith(wrap) and line.endswith(wrap) and len(line) > 2 * len(wrap):
                line = line[len(wrap) : -len(wrap)]
        if len(line) >= 2 and line[0] in _QUOTES and line[-1] in _QUOTES:
            line = line[1:-1]
    return line.strip()


def _clean_line(line: str) -> tuple[str, bool]:
    """``(item, marked)``: the line without list markers, surrounding quotes and bold/code markup, and whether
    it carried a list marker (markers may sit inside quotes/bold and vice versa)."""
    marked = False
    previous = None
    while previous != line:
        previous = line
        unmarked = _LIST_MARKER.sub("", line)
        marked = marked or unmarked != line
        line = _strip_quotes(unmarked)
    return " ".join(_INLINE_MARKUP.sub("", line).split()), marked


def clean_subqueries(text: str) -> list[str]:
    """Split an LLM's one-item-per-line answer into clean items (see the module docstring).

    Per line: skip blank lines, code-fence lines (```` ``` ````) and Markdown headings (``# ...``);
    remove list markers (``1.``, ``2)``, ``(3)``, ``4:``, ``-``, ``*``, ``•``, ``Query 1:``,
    ``Answer 1:``) when followed by whitespace, surrounding quotes, ``**`` and backticks; skip
    lines that end with ``:`` (preambles such as ``"Here are the queries:"``) and polite chatter
    (``Sure!``, ``Let me know if you need more!``). If any remaining line carried a list marker, only
    such lines are kept. Order is kept; duplicates are kept (see :func:`dedupe`).
    """
    items: list[tuple[str, bool]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("```") or _HEADING.match(line):
            continue
        item, marked = _clean_line(line)
        if not item or item.endswith(":") or _CHATTER.match(item):
            continue
        items.append((item, marked))
    listed = any(marked for _, marked in items)
    return [item for item, marked in items if marked or not listed]


def dedupe(texts: list[str]) -> list[str]:
    """Drop later items whose :func:`normalize`-d form repeats an earlier one (or is empty)."""
    seen: set[str] = set()
    out: list[str] = []
    for text in texts:
        key = normalize(text)
        if key and key not in seen:
            seen.add(key)
            out.append(text)
    return out


def repeated_sentence(story: str, min_repeats: int = MIN_REPEATS,
                      min_words: int = MIN_REPEATED_WORDS) -> tuple[str, int] | None:
    """The sentence ``story`` repeats most, and how often, when that is at least ``min_repeats``.

    Sentences end at ``.``, ``!`` or ``?`` followed by whitespace and are compared after
    :func:`normalize`; those of fewer than ``min_words`` words are ignored. A small model that loops
    ("The story of X is a tale of ... The story of X is a tale of ...") writes the same sentence
    again and again; a story that only repeats a title does not count. Ties: the first one written.
    """
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for sentence in _SENTENCE_END.split(story.strip()):
        key = normalize(sentence)
        if len(key.split()) < min_words:
            continue
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, sentence.strip())
    if not counts:
        return None
    key = max(counts, key=lambda k: counts[k])  # the first of equal counts (dicts keep insertion order)
    return (first[key], counts[key]) if counts[key] >= min_repeats else None
