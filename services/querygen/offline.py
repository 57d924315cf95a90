"""Offline story composer: a multi-aspect query without any LLM.

For each chosen document the composer extracts its most *salient* sentences
and joins the extracts, in plan order, into one text. It is fully
deterministic: no randomness, the same articles give the same story.

Salience (per document ``d`` among the ``N`` chosen documents):

* terms: lower-cased word tokens (``\\w+``) of at least 3 characters, not stop words;
* ``w_d(t) = tf_d(t) / |d| * idf(t)`` with ``idf(t) = ln((1 + N) / (1 + df(t))) + 1``,
  where ``tf_d(t)`` counts ``t`` in ``d``, ``|d|`` is the number of terms of ``d``
  and ``df(t)`` the number of chosen documents containing ``t`` (so words shared
  with the other aspects count less - TF-IDF against the other chosen docs);
* ``score(s) = sum(w_d(t) for t in set(terms(s))) / sqrt(|set(terms(s))|)``:
  the share of the document's distinctive vocabulary a sentence carries,
  damped for length.

Sentences end at line breaks, after ``.!?`` followed by a space and a capital
or digit, and after the full stops of Chinese and Japanese (``。！？``, closing
brackets kept with their sentence), which no space follows.

Selection: sentences of 5..60 words are candidates (all sentences if none
qualify); the ``sentences_per_doc`` best (ties -> earlier sentence) are kept
in document order, each cut to :data:`MAX_SENTENCE_CHARS` characters
(:func:`~services.querygen.story_prompt.truncate_text`): a text with no
sentence end at all is one sentence, which must not make the whole document
the query. If none of them mentions the title (checked with
:func:`~services.querygen.checks.missing_titles`), the best candidate that
does replaces the weakest kept sentence; if no sentence mentions it, the
extract is prefixed with ``"About <title>: "``. So every title appears.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from services.querygen.checks import missing_titles
from services.querygen.story_prompt import Article, truncate_text

__all__ = [
    "GENERATOR_NAME",
    "MAX_SENTENCE_CHARS",
    "OfflineStory",
    "compose_story",
    "sentence_score",
    "split_sentences",
    "term_weights",
    "terms",
]

GENERATOR_NAME = "offline-composer"

_STOP_WORDS = frozenset(
    """
    about above after again against all also among and any are because been before being
    below between both but can could did does doing down during each few for from further
    had has have having her here hers herself him himself his how into its itself just more
    most much not now off once only other our ours ourselves out over own same she should
    some such than that the their theirs them themselves then there these they this those
    through too under until very was were what when where which while who whom why will
    with would you your yours yourself yourselves one two may many known used use first
    """.split()
)
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9À-Ý])")
# Full stops of Chinese and Japanese, which no space follows; closing brackets and quotes stay with the sentence.
_CJK_SENTENCE_END = re.compile(r"(?<=[。！？])(?=[^\s」』）〕】〉》\"'])")
_MIN_WORDS, _MAX_WORDS = 5, 60
MAX_SENTENCE_CHARS = 500


@dataclass(frozen=True)
class OfflineStory:
    """The composed story plus the per-article extracts it is made of (plan order)."""

    text: str
    extracts: tuple[str, ...]
    generator: str = GENERATOR_NAME


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences: at line breaks, after ``.!?`` followed by space and a capital/digit, and after
    ``。！？`` (with the closing brackets or quotes that follow)."""
    sentences: list[str] = []
    for block in re.split(r"\n\s*", text):
        block = " ".join(block.split())
        if block:
            sentences.extend(p.strip() for s in _SENTENCE_END.split(block) for p in _CJK_SENTENCE_END.split(s)
                             if p.strip())
    return sentences


def terms(text: str) -> list[str]:
    """Lower-cased word tokens of length >= 3 that are not stop words or pure numbers."""
    return [
        w for w in (m.group(0).lower() for m in _WORD.finditer(text))
        if len(w) >= 3 and w not in _STOP_WORDS and not w.isdigit()
    ]


def term_weights(doc_terms: list[list[str]]) -> list[dict[str, float]]:
    """``w_d(t) = tf/|d| * (ln((1+N)/(1+df)) + 1)`` for every document ``d``."""
    n = len(doc_terms)
    df: Counter[str] = Counter()
    for ts in doc_terms:
        df.update(set(ts))
    out: list[dict[str, float]] = []
    for ts in doc_terms:
        tf = Counter(ts)
        total = max(len(ts), 1)
        out.append({t: c / total * (math.log((1 + n) / (1 + df[t])) + 1.0) for t, c in tf.items()})
    return out


def sentence_score(sentence: str, weights: dict[str, float]) -> float:
    """Sum of the weights of the sentence's distinct terms over sqrt(their number)."""
    distinct = set(terms(sentence))
    if not distinct:
        return 0.0
    return sum(weights.get(t, 0.0) for t in distinct) / math.sqrt(len(distinct))


def _extract(article: Article, weights: dict[str, float], k: int) -> str:
    """The ``k`` most salient sentences of ``article`` in document order, guaranteed to mention the title."""
    sentences = [truncate_text(s, MAX_SENTENCE_CHARS) for s in split_sentences(article.text)]
    if not sentences:
        return f"About {article.title}."
    candidates = [i for i, s in enumerate(sentences) if _MIN_WORDS <= len(s.split()) <= _MAX_WORDS]
    if not candidates:
        candidates = list(range(len(sentences)))
    scores = {i: sentence_score(sentences[i], weights) for i in candidates}
    ranked = sorted(candidates, key=lambda i: (-scores[i], i))
    kept = ranked[:k]
    mentions = [i for i in ranked if not missing_titles(sentences[i], [article.title])]
    if not any(i in mentions for i in kept):
        if mentions:
            kept[-1] = mentions[0]
        else:
            return f"About {article.title}: " + " ".join(sentences[i] for i in sorted(kept))
    return " ".join(sentences[i] for i in sorted(kept))


def compose_story(articles: list[Article], *, sentences_per_doc: int = 2) -> OfflineStory:
    """Deterministically compose a multi-aspect query from ``articles`` (see module docstring)."""
    if not articles:
        raise ValueError("A story needs at least one article.")
    if sentences_per_doc < 1:
        raise ValueError(f"sentences_per_doc must be at least 1, got {sentences_per_doc}.")
    weights = term_weights([terms(a.text) for a in articles])
    extracts = tuple(_extract(a, w, sentences_per_doc) for a, w in zip(articles, weights))
    return OfflineStory(text=" ".join(extracts), extracts=extracts)
