"""Tests for services.querygen.offline: salience arithmetic, title guarantee, determinism."""

from __future__ import annotations

import math

import pytest

from services.querygen.checks import missing_titles
from services.querygen.offline import (
    GENERATOR_NAME,
    compose_story,
    sentence_score,
    split_sentences,
    term_weights,
    terms,
)
from services.querygen.story_prompt import Article

MERCURY = Article(
    "Mercury (planet)",
    "Mercury is the smallest planet in the Solar System and the closest to the Sun. Its orbit takes 88 "
    "Earth days. Many people like to read about space. The surface is heavily cratered, with craters "
    "named after artists and writers. It has no natural satellites.",
)
JAZZ = Article(
    "Jazz",
    "Many people like to read about music. Jazz originated in the African-American communities of New "
    "Orleans. Improvisation, swing and blue notes characterise the genre. Famous performers include "
    "Louis Armstrong and Duke Ellington. Jazz spread worldwide in the 1920s.",
)
PHOTO = Article(
    "Photosynthesis",
    "Plants convert light energy into chemical energy. Chlorophyll absorbs mostly blue and red light. "
    "Oxygen is released as a by-product of splitting water.",
)


def test_terms_and_sentences() -> None:
    assert terms("The Alpha and 42 beta-Beta, of x!") == ["alpha", "beta", "beta"]
    assert split_sentences("One two. Three four!\nFive six? seven") == ["One two.", "Three four!", "Five six? seven"]


def test_term_weights_and_sentence_score_hand_computed() -> None:
    # A = [alpha, beta, beta], B = [beta, gamma]; N = 2; df(alpha) = df(gamma) = 1, df(beta) = 2
    # idf(alpha) = ln(3/2) + 1 = 1.4054651, idf(beta) = ln(3/3) + 1 = 1
    w_a, w_b = term_weights([terms("alpha beta beta"), terms("beta gamma")])
    assert w_a["alpha"] == pytest.approx(1 / 3 * 1.4054651)  # 0.4684884
    assert w_a["beta"] == pytest.approx(2 / 3 * 1.0)
    assert w_b["gamma"] == pytest.approx(1 / 2 * 1.4054651)
    # "Alpha and beta." -> distinct terms {alpha, beta}: (0.4684884 + 0.6666667) / sqrt(2) = 0.8026758
    assert sentence_score("Alpha and beta.", w_a) == pytest.approx(0.8026758)
    assert sentence_score("and the", w_a) == 0.0
    assert math.isclose(sentence_score("gamma", w_a), 0.0)


def test_salient_sentences_skip_shared_filler() -> None:
    story = compose_story([MERCURY, JAZZ])
    assert story.generator == GENERATOR_NAME == "offline-composer"
    assert story.extracts == (
        "Mercury is the smallest planet in the Solar System and the closest to the Sun. "
        "The surface is heavily cratered, with craters named after artists and writers.",
        "Jazz originated in the African-American communities of New Orleans. "
        "Famous performers include Louis Armstrong and Duke Ellington.",
    )
    assert story.text == " ".join(story.extracts)
    assert "Many people like to read" not in story.text


def test_title_sentence_replaces_weakest_pick() -> None:
    jazz = Article(
        "Jazz",
        "Improvisation swing syncopation bluesnotes dominate everything. "
        "Trumpets saxophones clarinets trombones drums appear often. "
        "Jazz is a genre of music people enjoy listening to.",
    )
    opera = Article("Opera", "Opera is a genre of music people enjoy listening to in theatres. Singers act.")
    # sentence 2 (7 unique terms) outranks sentence 1 (6 unique terms); neither mentions "Jazz",
    # so the title sentence replaces the weaker one; kept sentences stay in document order.
    assert compose_story([jazz, opera]).extracts[0] == (
        "Trumpets saxophones clarinets trombones drums appear often. "
        "Jazz is a genre of music people enjoy listening to."
    )


def test_about_prefix_when_no_sentence_mentions_the_title() -> None:
    extract = compose_story([PHOTO]).extracts[0]
    assert extract.startswith("About Photosynthesis: ")


def test_every_title_appears_and_output_is_deterministic() -> None:
    articles = [MERCURY, JAZZ, PHOTO, Article("Empty", "")]
    first = compose_story(articles)
    assert missing_titles(first.text, [a.title for a in articles]) == []
    assert first.extracts[3] == "About Empty."
    assert compose_story(articles) == first


def test_invalid_input() -> None:
    with pytest.raises(ValueError, match="at least one article"):
        compose_story([])
    with pytest.raises(ValueError, match="sentences_per_doc"):
        compose_story([JAZZ], sentences_per_doc=0)
