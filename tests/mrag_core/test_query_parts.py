"""Query parts without an LLM: sentences (abbreviations, no punctuation, one endless sentence, CJK, empty
parts), windows and paragraphs, on hand-written texts."""

from __future__ import annotations

import pytest

from mrag_core.query_parts import MAX_WORDS, MIN_WORDS, WORD_CHARS, paragraphs, split_sentences, windows


def test_sentences_end_at_full_stops_question_and_exclamation_marks():
    text = "The bridge opened in 1932. Who built it? Engineers from three countries did! They worked ten years."
    assert split_sentences(text) == [
        "The bridge opened in 1932.", "Who built it?", "Engineers from three countries did!",
        "They worked ten years.",
    ]


def test_abbreviations_initials_and_dotted_acronyms_do_not_end_a_sentence():
    text = ("Dr. Smith met Prof. Jones at St. Paul's Cathedral on Jan. 5 last year. "
            "J. R. R. Tolkien served in the U.S. Army, e.g. in France, as an officer. "
            "It ended at 3 p.m. Friday with a dinner.")
    assert split_sentences(text) == [
        "Dr. Smith met Prof. Jones at St. Paul's Cathedral on Jan. 5 last year.",
        "J. R. R. Tolkien served in the U.S. Army, e.g. in France, as an officer.",
        "It ended at 3 p.m. Friday with a dinner.",
    ]


def test_a_lower_case_word_after_a_full_stop_continues_the_sentence():
    assert split_sentences("The ship sailed at approx. six in the morning. it was late.") == [
        "The ship sailed at approx. six in the morning. it was late."]


def test_quotes_and_brackets_stay_with_their_sentence():
    text = 'She said "the lamp is lit." (The keeper agreed.) Then the storm came in.'
    assert split_sentences(text) == ['She said "the lamp is lit."', "(The keeper agreed.)", "Then the storm came in."]


def test_line_breaks_end_sentences_and_blank_text_has_none():
    assert split_sentences("First line without a stop\nsecond line here too\n\n  \n") == [
        "First line without a stop", "second line here too"]
    assert split_sentences("") == []
    assert split_sentences("  \n\n\t ") == []


def test_text_without_punctuation_is_one_sentence():
    assert split_sentences("a story about volcanoes and bridges and bees") == [
        "a story about volcanoes and bridges and bees"]


def test_one_very_long_sentence_is_cut_into_even_pieces():
    words = [f"w{i}" for i in range(150)]  # 150 words: 3 pieces of 50
    parts = split_sentences(" ".join(words))
    assert [len(p.split()) for p in parts] == [50, 50, 50]
    assert " ".join(parts).split() == words
    assert all(len(p.split()) <= MAX_WORDS for p in parts)


def test_a_spaceless_run_counts_one_word_per_word_chars():
    run = "".join(chr(97 + (i * 7) % 26) for i in range(WORD_CHARS * 70))  # 70 units: 2 pieces of 35
    parts = split_sentences(run)
    assert [len(p) for p in parts] == [WORD_CHARS * 35, WORD_CHARS * 35]
    assert "".join(parts) == run


def test_cjk_sentences_split_at_ideographic_full_stops():
    text = "東京は日本の首都です。大阪は大きい都市です！京都には寺が多いですか？"
    assert split_sentences(text) == ["東京は日本の首都です。", "大阪は大きい都市です！", "京都には寺が多いですか？"]


def test_cjk_without_full_stops_is_cut_by_characters():
    text = "".join(chr(0x4E00 + i) for i in range(130))  # 130 distinct ideographs: 3 pieces (44, 43, 43)
    parts = split_sentences(text)
    assert [len(p) for p in parts] == [44, 43, 43]
    assert "".join(parts) == text


def test_short_fragments_join_a_neighbour_and_repeats_are_dropped():
    assert MIN_WORDS == 3
    text = "Chapter one. The keeper climbed the stairs. Yes. The lamp was lit."
    assert split_sentences(text) == ["Chapter one. The keeper climbed the stairs. Yes.", "The lamp was lit."]
    assert split_sentences("The keeper climbed the stairs. The  KEEPER climbed the stairs.") == [
        "The keeper climbed the stairs."]
    assert split_sentences("Yes.") == ["Yes."]
    assert split_sentences("短。東京は日本の首都です。") == ["短。東京は日本の首都です。"]


def test_splitting_is_deterministic():
    text = "Mr. Brown went home. He slept.\nThen he woke. Ok."
    assert split_sentences(text) == split_sentences(text) == ["Mr. Brown went home. He slept.", "Then he woke. Ok."]


def test_windows_of_consecutive_sentences():
    assert windows(["a", "b", "c", "d"], 2) == ["a b", "b c", "c d"]
    assert windows(["a", "b", "c", "d"], 3) == ["a b c", "b c d"]
    assert windows(["a", "b"], 3) == ["a b"]
    assert windows([], 2) == []
    with pytest.raises(ValueError):
        windows(["a"], 0)


def test_paragraphs_are_blank_line_blocks():
    assert paragraphs("One two three.\nFour five.\n\n\nSix seven eight.") == [
        "One two three. Four five.", "Six seven eight."]
    assert paragraphs(" \n ") == []
