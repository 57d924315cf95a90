"""Tests for services.querygen.checks: title coverage and line-list cleaning."""

from __future__ import annotations

from services.querygen.checks import clean_subqueries, dedupe, missing_titles, normalize, title_variants


def test_normalize() -> None:
    assert normalize("  Café--au_lait, (Paris)! ") == "cafe au lait paris"


def test_title_variants_drop_trailing_parenthetical() -> None:
    assert title_variants("Mercury (planet)") == ["mercury planet", "mercury"]
    assert title_variants("Apollo 11") == ["apollo 11"]


def test_missing_titles_case_punctuation_and_parenthetical() -> None:
    story = "The planet MERCURY is hot; the Apollo-11 crew never went there. Cafe owners agree."
    titles = ["Mercury (planet)", "Apollo 11", "Café", "Venus", "Mars (mythology)"]
    assert missing_titles(story, titles) == ["Venus", "Mars (mythology)"]


def test_missing_titles_requires_word_boundaries() -> None:
    assert missing_titles("A story about Marseille.", ["Mars"]) == ["Mars"]
    assert missing_titles("Mars's moons are small.", ["Mars"]) == []


def test_missing_titles_multiword_and_unmatchable() -> None:
    story = "The Great  Wall of\nChina is long."
    assert missing_titles(story, ["Great Wall of China", "Wall of Berlin", "???"]) == ["Wall of Berlin"]


def test_clean_subqueries_numbering_and_blank_lines() -> None:
    assert clean_subqueries("1. a\n\n2) b\n- c") == ["a", "b", "c"]


def test_clean_subqueries_quotes_bullets_preamble_fences() -> None:
    text = (
        "Here are the queries:\n```\n* \"What is X?\"\n**Query 2: foo bar**\n(3) baz\n"
        "• 'qux'\n- 3.5 inch floppy\n```\n"
    )
    assert clean_subqueries(text) == ["What is X?", "foo bar", "baz", "qux", "3.5 inch floppy"]
    assert clean_subqueries("3.5 inch floppy\n`Mars moons`") == ["3.5 inch floppy", "Mars moons"]  # "3.5" is no marker


def test_clean_subqueries_keeps_only_the_list_items_of_a_chatty_answer() -> None:
    text = (
        "Sure! Here are three search queries:\n\n1. moons of Mars\nThis one asks about the satellites.\n"
        "2. **Phobos** and `Deimos` orbits\n3. \"Mars natural satellites\"\n\nLet me know if you need more!"
    )
    assert clean_subqueries(text) == ["moons of Mars", "Phobos and Deimos orbits", "Mars natural satellites"]


def test_clean_subqueries_without_a_list_drops_preamble_headings_and_chatter_lines() -> None:
    text = (
        "## Search queries\nCertainly, happy to help.\nHere's what I came up with\nmoons of Mars\n"
        "Sure: Phobos\nOK Computer album\nThese queries cover both meanings.\nI hope this helps!\n"
        "Feel free to ask for more.\nNote: none"
    )
    assert clean_subqueries(text) == ["moons of Mars", "OK Computer album"]


def test_dedupe_is_normalised_and_keeps_first() -> None:
    assert dedupe(["Mars moons", "mars, moons!", "", "Venus"]) == ["Mars moons", "Venus"]


def test_repeated_sentence_counts_normalised_sentences_of_four_words_or_more() -> None:
    from services.querygen.checks import repeated_sentence

    story = ("The story of the Hook Lighthouse is a tale of light. The story of the hook lighthouse is a tale of "
             "light! Yes. Yes. Yes. Yes. A new line here now. THE STORY OF THE HOOK LIGHTHOUSE, IS A TALE OF LIGHT?")
    assert repeated_sentence(story) == ("The story of the Hook Lighthouse is a tale of light.", 3)
    assert repeated_sentence(story, min_repeats=4) is None  # "Yes." x4 is too short to count
    assert repeated_sentence(story, min_words=1) == ("Yes.", 4)
    assert repeated_sentence("One sentence only here. Another different sentence here.") is None
    assert repeated_sentence("") is None
